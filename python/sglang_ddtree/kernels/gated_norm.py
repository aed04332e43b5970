"""Gated RMSNorm of a GatedDeltaNet layer's core output, reading the gate through its strides
(Triton), with the plain-torch reference beside it.

    x    [M, G, D]   core attention output (one row per token, G value heads of D), stride of D 1
    z    [M, G, D]   gate, any strides with stride of D 1 (e.g. a column view of sglang's
                     ``[M, q | k | v | z]`` projection, rows ``2 * key_dim + 2 * value_dim`` apart)
    weight [D]
    ->   y [M, G * D] contiguous, x's dtype

Per token and head, in fp32: ``y = x * rsqrt(mean(x^2) + eps) * weight * act(z)`` with
``act(z) = z * sigmoid(z)`` ("swish" / "silu") or ``sigmoid(z)`` ("sigmoid"), then cast to x's
dtype: the formula of sglang's gated RMSNorm (``kernels/ops/attention/fla/layernorm_gated.py``,
``norm_before_gate=True``, one group per head), which needs the gate as a contiguous
``[M * G, D]`` copy where this kernel reads it in place. Raises ValueError for shapes or strides
outside this contract and for another activation.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

ACTIVATIONS = ("swish", "silu", "sigmoid")


@triton.jit
def _gated_rmsnorm_kernel(x, z, w, y, G, sx_m, sx_g, sz_m, sz_g, eps,
                          D: tl.constexpr, BG: tl.constexpr, BD: tl.constexpr, SIGMOID_ONLY: tl.constexpr):
    """Grid (M, cdiv(G, BG)): one token's BG heads."""
    m = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1) * BG + tl.arange(0, BG)
    d = tl.arange(0, BD)
    mask = (g < G)[:, None] & (d < D)[None, :]
    xv = tl.load(x + m * sx_m + g[:, None] * sx_g + d[None, :], mask=mask, other=0.0).to(tl.float32)
    zv = tl.load(z + m * sz_m + g[:, None] * sz_g + d[None, :], mask=mask, other=0.0).to(tl.float32)
    wv = tl.load(w + d, mask=d < D, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xv * xv, 1) / D + eps)
    out = xv * rstd[:, None] * wv[None, :]
    if SIGMOID_ONLY:
        out *= tl.sigmoid(zv)
    else:
        out *= zv * tl.sigmoid(zv)
    tl.store(y + (m * G + g[:, None]) * D + d[None, :], out.to(y.dtype.element_ty), mask=mask)


def _check(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"gated_rmsnorm: activation {activation!r} is not one of {ACTIVATIONS}")
    if x.dim() != 3 or tuple(z.shape) != tuple(x.shape) or tuple(weight.shape) != (x.shape[2],):
        raise ValueError(f"gated_rmsnorm: x and z [M, G, D] and weight [D] expected, got {tuple(x.shape)}, "
                         f"{tuple(z.shape)}, {tuple(weight.shape)}")
    if x.stride(2) != 1 or z.stride(2) != 1:
        raise ValueError(f"gated_rmsnorm: the last dim of x and z must be contiguous (strides {tuple(x.stride())}, "
                         f"{tuple(z.stride())})")


def gated_rmsnorm(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float,
                  activation: str = "swish", block_heads: Optional[int] = None) -> torch.Tensor:
    """See the module docstring: ``[M, G * D]`` in x's dtype. ``block_heads``: heads per program
    (a power of two; default as many as fit 4096 elements)."""
    _check(x, z, weight, activation)
    M, G, D = x.shape
    y = torch.empty(M, G * D, dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    BD = triton.next_power_of_2(D)
    BG = block_heads or max(1, min(triton.next_power_of_2(G), 4096 // BD))
    if BG & (BG - 1):
        raise ValueError(f"gated_rmsnorm: block_heads must be a power of two, got {BG}")
    _gated_rmsnorm_kernel[(M, triton.cdiv(G, BG))](
        x, z, weight.contiguous(), y, G, x.stride(0), x.stride(1), z.stride(0), z.stride(1), float(eps),
        D=D, BG=BG, BD=BD, SIGMOID_ONLY=activation == "sigmoid", num_warps=4)
    return y


def gated_rmsnorm_reference(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float,
                            activation: str = "swish", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Plain torch, computed in ``dtype`` (float64 for tests), returned in x's dtype as ``[M, G * D]``."""
    _check(x, z, weight, activation)
    xf, zf, wf = x.to(dtype), z.to(dtype), weight.to(dtype)
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * wf
    out = out * (torch.sigmoid(zf) if activation == "sigmoid" else zf * torch.sigmoid(zf))
    return out.reshape(x.shape[0], -1).to(x.dtype)
