"""kernels/skinny_gemm.py, the linear layer for few tokens, against its float64 reference on fresh
random bf16 / fp16 inputs (bf16 on a GPU only: the interpreter's ``tl.dot`` misreads bf16): within 1e-2 of the output's max (the reference uses the same rounded
inputs; what remains is fp32 accumulation and one rounding of the output); NaN never passes, and
every output element is written (outputs are poisoned first). Compiled on a GPU, in the Triton
interpreter on CPU (small shapes)."""

from __future__ import annotations

import pytest
import torch
from gdn_cases import DEV, HAS_CUDA, interpreter_test, kernels_here

from sglang_ddtree.kernels.skinny_gemm import (Config, _prefetch_plan, m_tiles, prefetch_l2, prefetch_lines_for,
                                               silu_mul_reference, skinny_linear, skinny_linear_reference)

test_in_triton_interpreter = interpreter_test(__file__)

# Small enough for the interpreter; on a GPU a row at the target's widths too.
SHAPES = [(1, 40, 128), (16, 96, 256), (17, 130, 512), (33, 64, 256), (64, 72, 128), (65, 40, 128)]
DTYPES = [torch.float16]
if HAS_CUDA:
    SHAPES += [(17, 5120, 17408), (16, 34816, 5120), (3, 96, 5120), (65, 16384, 5120), (68, 5120, 6144)]
    DTYPES += [torch.bfloat16]


def _inputs(M, N, K, dtype, seed, bias):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype).to(DEV)
    w = (torch.randn(N, K, generator=g) / K ** 0.5).to(dtype).to(DEV)
    b = torch.randn(N, generator=g).to(dtype).to(DEV) if bias else None
    return x, w, b


def _rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def _reference64(x, w, b):
    y = x.double().cpu() @ w.double().cpu().T
    return y + b.double().cpu() if b is not None else y


@kernels_here
@pytest.mark.parametrize("M,N,K,tail", [(*s, False) for s in SHAPES] + [(*s, True) for s in SHAPES if m_tiles(s[0], True)[1]])
@pytest.mark.parametrize("split_k", [1, 2, 4])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_float64_reference(M, N, K, split_k, bias, dtype, tail):
    x, w, b = _inputs(M, N, K, dtype, seed=M * 7 + N + K + split_k, bias=bias)
    cfg = Config(BN=64, BK=32, split_k=split_k, num_stages=2, tail=tail)
    out = torch.full((M, N), float("nan"), dtype=dtype, device=DEV)
    y = skinny_linear(x, w, b, cfg, out=out)
    assert y.data_ptr() == out.data_ptr() and y.shape == (M, N) and y.dtype == dtype
    assert not torch.isnan(y).any()
    assert _rel(y.cpu(), _reference64(x, w, b)) < 1e-2
    assert _rel(skinny_linear_reference(x, w, b).cpu(), _reference64(x, w, b)) < 1e-2


@kernels_here
@pytest.mark.parametrize("M,N,K,tail", [(1, 40, 128, False), (17, 96, 256, False), (17, 96, 256, True)]
                         + ([(17, 5120, 17408, False), (65, 5120, 17408, True)] if HAS_CUDA else []))
@pytest.mark.parametrize("split_k", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_mul_in_the_product_matches_the_two_step_reference(M, N, K, tail, split_k, dtype):
    """``act="silu_mul"``: the product of silu(gate) * up, formed and rounded as sglang's
    activation writes it, equals the activation's output multiplied in float64."""
    g = torch.Generator().manual_seed(M + N + split_k)
    x = (torch.randn(M, 2 * K, generator=g) * 2).to(dtype).to(DEV)
    w = (torch.randn(N, K, generator=g) / K ** 0.5).to(dtype).to(DEV)
    y = skinny_linear(x, w, cfg=Config(BN=64, BK=32, split_k=split_k, num_stages=2, tail=tail), act="silu_mul")
    h = silu_mul_reference(x.cpu())
    assert h.shape == (M, K)
    assert not torch.isnan(y).any()
    assert _rel(y.cpu(), _reference64(h, w, None)) < 1e-2
    assert _rel(skinny_linear_reference(x, w, act="silu_mul").cpu(), _reference64(h, w, None)) < 1e-2
    # and it is not the product of the raw gate_up halves
    assert _rel(y.cpu(), _reference64(x[:, :K], w, None)) > 0.1


@kernels_here
@pytest.mark.parametrize("cfg", [Config(BN=32, BK=128, split_k=2), Config(BN=128, BK=64), Config(BN=16, BK=32)]
                         + ([Config(BN=64, BK=64, split_k=2, pdl=True), Config(BN=64, BK=64, pdl=True)]
                            if HAS_CUDA else []))  # (PDL's griddepcontrol is PTX: not in the interpreter)
def test_every_tiling_gives_the_same_sums(cfg):
    """Tilings differ only in how K is split; with fp16 inputs whose products are exact in fp32 and
    sums below 2^24 ulp, every tiling gives the same bits."""
    g = torch.Generator().manual_seed(5)
    M, N, K = 9, 70, 256
    x = torch.randint(-4, 5, (M, K), generator=g).to(torch.float16).to(DEV)
    w = torch.randint(-4, 5, (N, K), generator=g).to(torch.float16).to(DEV)
    want = (x.double().cpu() @ w.double().cpu().T).to(torch.float16)
    assert torch.equal(skinny_linear(x, w, cfg=cfg).cpu(), want)


@kernels_here
@pytest.mark.parametrize("M", [17, 20, 40, 48, 65, 80])
@pytest.mark.parametrize("split_k", [1, 2])
def test_the_tail_tile_gives_the_same_sums(M, split_k):
    """Every token, the tail's included, gets the same bits with the tail tile as with the padded
    one (exact fp16 products and sums, as above); outputs poisoned first."""
    g = torch.Generator().manual_seed(M)
    N, K = 70, 256
    x = torch.randint(-4, 5, (M, K), generator=g).to(torch.float16).to(DEV)
    w = torch.randint(-4, 5, (N, K), generator=g).to(torch.float16).to(DEV)
    want = (x.double().cpu() @ w.double().cpu().T).to(torch.float16)
    cfg = Config(BN=32, BK=64, split_k=split_k, num_stages=2)
    for c in (cfg, Config(**{**cfg.__dict__, "tail": True})):
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device=DEV)
        assert torch.equal(skinny_linear(x, w, cfg=c, out=out).cpu(), want), c


@pytest.mark.skipif(not HAS_CUDA, reason="the L2 prefetch is a GPU instruction")
@pytest.mark.parametrize("split_k,lines,evict_last", [(1, 256, False), (2, 1024, True), (4, 8192, False)])
def test_the_l2_prefetch_changes_no_result(split_k, lines, evict_last):
    """A product that asks the L2 for another tensor gives the same bits as without, the other
    tensor is untouched, and the prefetch kernel of its own leaves it untouched too."""
    x, w, b = _inputs(16, 5120, 2048, torch.bfloat16, seed=split_k, bias=True)
    nxt = torch.randn(3 << 20, device=DEV).to(torch.bfloat16)
    keep = nxt.clone()
    cfg = Config(BN=64, BK=128, split_k=split_k, num_stages=3)
    want = skinny_linear(x, w, b, cfg)
    for nbytes in (1 << 20, 64 << 20):  # within the tensor, and past its end (clipped)
        got = skinny_linear(x, w, b, cfg, prefetch=nxt, prefetch_bytes=nbytes, prefetch_lines=lines,
                            prefetch_evict_last=evict_last)
        prefetch_l2(nxt, nbytes, lines, evict_last)
        torch.cuda.synchronize()
        assert torch.equal(got, want) and torch.equal(nxt, keep)


def test_prefetch_plan():
    """Programs of ``lines`` 128-byte lines cover the bytes asked for, within the tensor and the
    grid; none without a CUDA tensor or bytes."""
    t = torch.empty(1 << 20, dtype=torch.bfloat16)  # 2 MiB, on CPU
    assert _prefetch_plan(t, 1 << 20, 256, 100) == (0, 0)  # CPU: nothing to ask
    assert _prefetch_plan(None, 1 << 20, 256, 100) == (0, 0)
    if HAS_CUDA:
        g = torch.empty(1 << 20, dtype=torch.bfloat16, device="cuda")
        assert _prefetch_plan(g, 1 << 20, 256, 100) == (32, 256)  # 1 MiB / 32 KiB
        assert _prefetch_plan(g, 1 << 20, 256, 10) == (10, 256)  # the grid's programs at most
        assert _prefetch_plan(g, 8 << 20, 256, 1000) == (64, 256)  # the tensor's 2 MiB at most
        assert _prefetch_plan(g, 0, 256, 100) == (0, 0)
        assert _prefetch_plan(g[::2], 1 << 20, 256, 100) == (0, 0)  # not contiguous
        assert _prefetch_plan(g, 1 << 20, None, 1) == (1, 8192)  # 1 MiB from one program
        assert prefetch_lines_for(1 << 10, 1 << 20, g.device) == 256  # the fewest
    prefetch_l2(t, 1 << 20)  # a CPU tensor: nothing launched, nothing raised


def test_m_tiles():
    assert [m_tiles(m) for m in (1, 16, 17, 33, 64, 65, 128)] == [
        (16, 0), (16, 0), (32, 0), (64, 0), (64, 0), (128, 0), (128, 0)]
    assert [m_tiles(m, True) for m in (16, 17, 32, 33, 48, 49, 64, 65, 80, 81)] == [
        (16, 0), (16, 16), (16, 16), (32, 16), (32, 16), (64, 0), (64, 0), (64, 16), (64, 16), (128, 0)]


def test_config_names_round_trip():
    for cfg in (Config(), Config(BN=64, BK=128, split_k=4, num_stages=6, num_warps=8), Config(pdl=True),
                Config(tail=True), Config(tail=True, pdl=True)):
        assert Config.from_name(cfg.name()) == cfg
    assert Config(tail=True, pdl=True).name() == "bn64_bk128_sk1_st4_w4_tail_pdl"
    for bad in ("", "bn64", "bn64_bk128_sk1_st4", "bk64_bn128_sk1_st4_w4", "bn6x_bk128_sk1_st4_w4",
                "bn64_bk128_sk1_st4_w4_pdl_pdl", "bn64_bk128_sk1_st4_pdl", "bn64_bk128_sk1_st4_w4_pdl_tail",
                "bn64_bk128_sk1_st4_w4_tail_tail"):
        with pytest.raises(ValueError, match="tiling name"):
            Config.from_name(bad)


def test_bad_arguments_are_refused():
    x = torch.zeros(4, 128, dtype=torch.bfloat16)
    w = torch.zeros(8, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"\[M, K\]"):
        skinny_linear(x, w[:, :64])
    with pytest.raises(ValueError, match="M = 129"):
        skinny_linear(torch.zeros(129, 128, dtype=torch.bfloat16), w)
    with pytest.raises(ValueError, match="bf16 or fp16"):
        skinny_linear(x.float(), w.float())
    with pytest.raises(ValueError, match="multiple of BK"):
        skinny_linear(x, w, cfg=Config(BK=256, split_k=1))
    with pytest.raises(ValueError, match="contiguous"):
        skinny_linear(torch.zeros(4, 256, dtype=torch.bfloat16)[:, ::2], w)
    with pytest.raises(ValueError, match="act"):
        skinny_linear(x, w, act="gelu")
    with pytest.raises(ValueError, match=r"\[M, 2K\]"):
        skinny_linear(x, w, act="silu_mul")
    with pytest.raises(ValueError, match="bias"):
        skinny_linear(x, w, torch.zeros(7, dtype=torch.bfloat16), cfg=Config(BK=64))
