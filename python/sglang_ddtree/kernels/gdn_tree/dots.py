"""Helpers shared by the tree GatedDeltaNet kernels.

Device side (``@triton.jit``, inlined into the kernels of ``verify``, ``commit`` and ``conv``):
products of 16-bit and fp32 tiles, fp32 values split into bf16 parts, round-to-nearest in a
narrower dtype, softplus, q/k row loads with their L2 norms, and the (V tile, request, head)
coordinates of a program.

Host side: the launch arguments several wrappers build the same way (layer strides of stacked
buffers, the destination-slot argument, the dtypes the conv products round to).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

# How a product of two bf16 tiles runs inside :func:`dotf`: 2 in the Triton interpreter (whose
# dot multiplies bf16 bit patterns as integers, see :func:`dot16`), else 1.
D16 = tl.constexpr(2 if os.environ.get("TRITON_INTERPRET") == "1" else 1)


@triton.jit
def softplus(x):
    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))


@triton.jit
def round_to(v, DT: tl.constexpr):
    """fp32 ``v`` rounded to nearest even in ``DT``, returned as fp32. bf16 by integer
    arithmetic, because the Triton interpreter's fp32 -> bf16 cast truncates (the GPU's rounds):
    the CPU tests then see the GPU's numbers."""
    if DT == tl.bfloat16:
        b = v.to(tl.uint32, bitcast=True)
        b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
        return b.to(tl.float32, bitcast=True)
    else:
        return v.to(DT).to(tl.float32)


@triton.jit
def load_rows(p, rows, m_r, o_k, m_k, stride_t, scale, RAW16: tl.constexpr):
    """Rows of q or k and ``scale / |row|`` ([BT, BK], [BT]). RAW16: the rows stay in their
    16-bit type (exact operands of a bf16 tensor-core product; the norm is applied to the
    product), else they come back normalised in fp32 with a factor of 1."""
    x = tl.load(p + rows[:, None] * stride_t + o_k[None, :], mask=m_r[:, None] & m_k[None, :], other=0.0)
    xf = x.to(tl.float32)
    r = scale / tl.sqrt(tl.sum(xf * xf, 1) + 1e-6)
    if RAW16:
        return x, r
    else:
        return xf * r[:, None], tl.full(r.shape, 1.0, tl.float32)


@triton.jit
def dot16(a, b, RAW16: tl.constexpr):
    """Product of 16-bit operands, fp32 out. RAW16 == 2 in the Triton interpreter, whose dot
    multiplies bf16 bit patterns as integers: there the (exact) fp32 values are multiplied."""
    if RAW16 == 2:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def dotf(a, b, PREC: tl.constexpr):
    """Product of two fp32 tiles at ``PREC``: Triton's ``input_precision`` ("tf32x3", "ieee"), or
    "bf16x3": each operand split in a bf16 high part and a bf16 remainder, three bf16
    tensor-core products (``lo.hi + hi.lo + hi.hi``, smallest first; the ``lo.lo`` term and the
    remainders' own rounding leave ~2^-16 relative error, against tf32x3's ~2^-21; bf16 runs at
    twice the tf32 rate on sm_90 and sm_120). Written out rather than Triton's own "bf16x3" so
    that the interpreter runs the same rounding."""
    if PREC == "bf16x3":
        ah, al = split2(a)
        bh, bl = split2(b)
        return (dot16(al, bh, D16) + dot16(ah, bl, D16)) + dot16(ah, bh, D16)
    else:
        return tl.dot(a, b, input_precision=PREC)


@triton.jit
def split2(x):
    """fp32 ``x`` as two bf16 parts with ``x ~= x1 + x2`` to ~16 bits (the remainder ``x - x1`` is
    exact in fp32 before its rounding to bf16)."""
    x1 = x.to(tl.bfloat16)
    x2 = (x - x1.to(tl.float32)).to(tl.bfloat16)
    return x1, x2


@triton.jit
def split3(x):
    """fp32 ``x`` as three bf16 parts with ``x ~= x1 + x2 + x3`` to ~24 bits (each remainder is
    exact in fp32): with 16-bit left operands, three bf16 tensor-core products then give an
    fp32-accurate product (each partial product is exact in the fp32 accumulator)."""
    x1, x2 = split2(x)
    x3 = ((x - x1.to(tl.float32)) - x2.to(tl.float32)).to(tl.bfloat16)
    return x1, x2, x3


@triton.jit
def head_tile(state_idx, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
              BK: tl.constexpr, BV: tl.constexpr, READ_ONLY: tl.constexpr = True):
    """Grid (V tiles, bs * HV): this program's request, value head, key head, tile offsets and slot.
    READ_ONLY (the verify kernels): a negative slot — sglang's PAD_SLOT_ID (-1), the padded rows
    of a CUDA-graph replay — reads slot 0 instead of memory before the pool; those rows' outputs
    are discarded."""
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // HV
    i_hv = i_bh % HV
    i_h = i_hv // (HV // H)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    slot = tl.load(state_idx + i_b).to(tl.int64)
    if READ_ONLY:
        slot = tl.maximum(slot, 0)
    return i_v, i_b, i_hv, i_h, o_k, o_v, o_k < K, o_v < V, slot


# ----------------------------------------------------------------------------- host side


def layer_stride(t, inner_shape) -> int:
    """Elements from one layer to the next of ``t [L, *inner_shape]`` whose layers are each
    contiguous (a slice of a larger buffer may have any layer stride); 0 for one layer.
    Raises ValueError for another shape or a non-contiguous layer."""
    if tuple(t.shape[1:]) != tuple(inner_shape) or not t[0].is_contiguous():
        raise ValueError(f"expected layers of contiguous {tuple(inner_shape)}, got {tuple(t.shape)} "
                         f"strides {tuple(t.stride())}")
    return int(t.stride(0)) if t.shape[0] > 1 else 0


def dst_arg(dst_idx, state_idx):
    """The destination-slot argument of the commit kernels, int32 (``state_idx`` as a placeholder
    when there is none: the kernels do not read it then)."""
    return (dst_idx if dst_idx is not None else state_idx).to(torch.int32).contiguous()


_TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


def conv_product_dtypes(x_dtype, weight_dtype, state_dtype) -> dict:
    """The dtypes sglang's conv products round to, as the conv kernels' ``PX`` (input x weight)
    and ``PS`` (state x weight)."""
    return dict(PX=_TL_DTYPES[torch.promote_types(x_dtype, weight_dtype)],
                PS=_TL_DTYPES[torch.promote_types(state_dtype, weight_dtype)])
