"""kernels/gated_norm.py, the GatedDeltaNet output's gated RMSNorm with the gate read through its
strides, against its float64 reference on fresh random inputs: fp32 inputs within 1e-5 relative,
bf16 within 1e-2 (one bf16 rounding of the output); NaN never passes. Compiled on a GPU (also
against sglang's own gated norm kernel on a contiguous copy of the gate), in the Triton
interpreter on CPU."""

from __future__ import annotations

import pytest
import torch
from gdn_cases import DEV, HAS_CUDA, interpreter_test, kernels_here

from sglang_ddtree.kernels.gated_norm import gated_rmsnorm, gated_rmsnorm_reference

test_in_triton_interpreter = interpreter_test(__file__)


def _inputs(M, G, D, dtype, seed, extra=5):
    """x [M, G, D] contiguous; z a [M, G, D] column view of a [M, 3 * G * D + extra] tensor whose
    other columns are NaN (a read outside the view shows)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(M, G, D, generator=g) * 2).to(dtype).to(DEV)
    wide = torch.full((M, 3 * G * D + extra), float("nan"), dtype=dtype, device=DEV)
    zc = (torch.randn(M, G * D, generator=g) * 3).to(dtype).to(DEV)
    wide[:, G * D + extra: 2 * G * D + extra] = zc
    z = wide[:, G * D + extra: 2 * G * D + extra].view(M, G, D)
    w = (torch.rand(D, generator=g) + 0.5).to(dtype).to(DEV)
    return x, z, w


def _rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


@kernels_here
@pytest.mark.parametrize("M,G,D", [(17, 6, 32), (5, 3, 128), (1, 48, 16), (33, 5, 24)])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("activation", ["swish", "sigmoid"])
def test_gated_rmsnorm_matches_float64_reference(M, G, D, dtype, tol, activation):
    x, z, w = _inputs(M, G, D, dtype, seed=M * 100 + G * 10 + D)
    assert M == 1 or z.stride(0) == 3 * G * D + 5  # rows of the wider tensor
    y = gated_rmsnorm(x, z, w, 1e-6, activation)
    want = gated_rmsnorm_reference(x.cpu(), z.cpu(), w.cpu(), 1e-6, activation, dtype=torch.float64)
    assert y.shape == (M, G * D) and y.dtype == dtype and y.is_contiguous()
    assert not torch.isnan(y).any()
    assert _rel(y.cpu(), want) < tol


@kernels_here
@pytest.mark.parametrize("block_heads", [1, 2, 8])
def test_every_head_block_gives_the_same_rows(block_heads):
    x, z, w = _inputs(5, 6, 32, torch.float32, seed=block_heads)
    assert torch.equal(gated_rmsnorm(x, z, w, 1e-6, block_heads=block_heads), gated_rmsnorm(x, z, w, 1e-6))
    with pytest.raises(ValueError, match="power of two"):
        gated_rmsnorm(x, z, w, 1e-6, block_heads=3)


@kernels_here
def test_silu_is_swish_and_empty_input():
    x, z, w = _inputs(4, 3, 16, torch.float32, seed=3)
    assert torch.equal(gated_rmsnorm(x, z, w, 1e-6, "silu"), gated_rmsnorm(x, z, w, 1e-6, "swish"))
    e = gated_rmsnorm(x[:0], z[:0], w, 1e-6)
    assert e.shape == (0, 48)


def test_bad_arguments_are_refused():
    x = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match="activation"):
        gated_rmsnorm_reference(x, x, torch.ones(8), 1e-6, "gelu")
    with pytest.raises(ValueError, match=r"\[M, G, D\]"):
        gated_rmsnorm_reference(x, x[:, :2], torch.ones(8), 1e-6)
    with pytest.raises(ValueError, match="contiguous"):
        gated_rmsnorm_reference(x, torch.zeros(2, 3, 16)[:, :, ::2], torch.ones(8), 1e-6)


@pytest.mark.skipif(not HAS_CUDA, reason="sglang's gated norm kernel is compiled Triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_equals_sglangs_gated_norm_on_a_contiguous_gate(dtype):
    from sglang.kernels.ops.attention.fla.layernorm_gated import RMSNorm as RMSNormGated

    M, G, D = 17, 48, 128
    x, z, w = _inputs(M, G, D, dtype, seed=11)
    norm = RMSNormGated(D, eps=1e-6, group_size=None, norm_before_gate=True, device=DEV, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(w)
    theirs = norm(x.reshape(-1, D), z.reshape(-1, D)).reshape(M, G * D)
    ours = gated_rmsnorm(x, z, w, 1e-6)
    # Same formula and fp32 arithmetic; the row sum may be ordered differently.
    assert _rel(ours, theirs) < (2e-6 if dtype == torch.float32 else 8e-3)
