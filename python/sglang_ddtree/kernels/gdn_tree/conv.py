"""Tree causal conv (Triton): the depthwise short conv of sglang's GDN layers over each node's
ancestor window, and its commit (the new conv window along the accepted path).

    x          [T = bs * N, C]    the layer's pre-conv projections
    weight     [C, W]             bias [C] or None
    conv_state [slots, C, W-1]    oldest column first; any strides (sglang's pool is channel-fastest)
    state_idx  [bs]               each request's slot; negative: a padded row (reads slot 0)
    parent     [bs, N]            -1 = root

Node t's window is (ancestor_{W-1}, ..., parent, t), the committed conv state filling in above
the root; each product is rounded to its operands' promoted dtype before the fp32 sum, as
sglang's ``causal_conv1d_update`` rounds it (:func:`.naive.conv_tree_path_reference` with
``round_products``). The conv commit writes the last W-1 inputs along the accepted path
(:func:`.naive.conv_commit_state`); ``accepted`` / ``accept_len`` / ``dst_idx`` as in :mod:`.commit`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dots import conv_product_dtypes, dst_arg, layer_stride, round_to
from .heuristics import conv_flat


@triton.jit
def _tree_conv_kernel(
    x, w, bias, conv_state, state_idx, parent, out, x_copy,
    T, N, C, s_x, s_slot, s_c, s_w, C1, C2,
    KW: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr, BN: tl.constexpr, BC: tl.constexpr,
    PX: tl.constexpr, PS: tl.constexpr, FLAT: tl.constexpr = False, COPY_X: tl.constexpr = False,
    SPLIT: tl.constexpr = False,
):
    """Grid (C tiles, node tiles, bs): BN nodes of one tree; FLAT: grid (C tiles, token tiles),
    BN tokens of the flattened ``[T = bs * N]`` batch, which may span trees (each row finds its
    tree and state slot), so a 17-node tree costs 17 rows instead of two 16-row tiles. ``x`` rows
    ``s_x`` elements apart; COPY_X: each node's own input row also stored to ``x_copy`` ``[T, C]``.
    SPLIT: ``out`` holds three row-major blocks one after the other, channels ``[0, C1)`` as
    ``[T, C1]``, ``[C1, C2)`` as ``[T, C2 - C1]`` and ``[C2, C)`` as ``[T, C - C2]``."""
    i_c = tl.program_id(0)
    o_c = i_c * BC + tl.arange(0, BC)
    m_c = o_c < C
    if FLAT:
        o_tok = tl.program_id(1) * BN + tl.arange(0, BN)
        m_n = o_tok < T
        i_b = tl.where(m_n, o_tok // N, 0)
        o_n = o_tok - i_b * N
        slot = tl.maximum(tl.load(state_idx + i_b).to(tl.int64), 0)[:, None]
    else:
        i_b = tl.program_id(2)
        o_n = tl.program_id(1) * BN + tl.arange(0, BN)
        m_n = o_n < N
        slot = tl.maximum(tl.load(state_idx + i_b).to(tl.int64), 0)  # PAD_SLOT_ID rows: see dots.head_tile
    tok0 = i_b * N
    acc = tl.zeros([BN, BC], dtype=tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias + o_c, mask=m_c, other=0.0).to(tl.float32)[None, :]
    cur = tl.where(m_n, o_n, -1)
    up = tl.zeros([BN], dtype=tl.int32)
    for j in tl.static_range(KW):
        # Tap j (0 = the node itself) uses weight column KW-1-j; above the root it reads the
        # committed state from its newest column backwards.
        in_tree = cur >= 0
        xr = tl.load(x + (tok0 + tl.maximum(cur, 0))[:, None] * s_x + o_c[None, :],
                     mask=in_tree[:, None] & m_c[None, :], other=0.0)
        if COPY_X and j == 0:  # tap 0 reads the node's own row
            tl.store(x_copy + (tok0 + o_n)[:, None] * C + o_c[None, :], xr, mask=m_n[:, None] & m_c[None, :])
        xv = xr.to(tl.float32)
        col = (KW - 1) - up
        use_state = (~in_tree) & m_n & (col >= 0)
        sv = tl.load(conv_state + slot * s_slot + o_c[None, :] * s_c + tl.maximum(col, 0)[:, None] * s_w,
                     mask=use_state[:, None] & m_c[None, :], other=0.0).to(tl.float32)
        wc = tl.load(w + o_c * KW + (KW - 1 - j), mask=m_c, other=0.0).to(tl.float32)
        # Each product rounded to its operands' promoted dtype (PX: input x weight, PS: state x
        # weight; bf16 in the engine), then accumulated in fp32: the rounding of sglang's
        # causal_conv1d_update, which multiplies unwidened loads and which the plain decode
        # uses. (An fp32 product of two bf16/fp16 values is exact, so rounding it equals the
        # native low-precision multiply.) Exact fp32 products gave conv outputs one bf16 ulp
        # off here and there, which a greedy decode turned into another token within a few steps.
        acc += tl.where(in_tree[:, None], round_to(xv * wc[None, :], PX), round_to(sv * wc[None, :], PS))
        par = tl.load(parent + tok0 + tl.maximum(cur, 0), mask=in_tree, other=-1)
        up = tl.where(in_tree, tl.where(par < 0, 1, 0), up + 1)
        cur = tl.where(in_tree, par, -1)
    if SILU:
        acc = acc / (1.0 + tl.exp(-acc))
    row = (tok0 + o_n)[:, None]
    col = o_c[None, :]
    if SPLIT:
        dst = tl.where(col < C1, row * C1 + col,
                       tl.where(col < C2, T * C1 + row * (C2 - C1) + (col - C1), T * C2 + row * (C - C2) + (col - C2)))
    else:
        dst = row * C + col
    tl.store(out + dst, round_to(acc, out.dtype.element_ty).to(out.dtype.element_ty), mask=m_n[:, None] & m_c[None, :])


@triton.jit
def _tree_conv_commit_kernel(
    x, conv_state, state_idx, accepted, accept_len, dst_idx,
    N, C, s_slot, s_c, s_w, l_x, l_conv,
    KW: tl.constexpr, P: tl.constexpr, BC: tl.constexpr, BW: tl.constexpr, HAS_DST: tl.constexpr,
):
    """Grid (C tiles, bs, layers): program_id(2) picks the layer (inputs and conv pool ``l_x`` /
    ``l_conv`` elements after the previous layer's)."""
    i_c = tl.program_id(0)
    i_b = tl.program_id(1)
    if HAS_DST:
        if tl.load(dst_idx + i_b) < 0:
            return
    layer = tl.program_id(2).to(tl.int64)
    x += layer * l_x
    conv_state += layer * l_conv
    o_c = i_c * BC + tl.arange(0, BC)
    o_w = tl.arange(0, BW)
    m_c = o_c < C
    m_w = o_w < KW - 1
    slot = tl.load(state_idx + i_b).to(tl.int64)
    n = tl.load(accept_len + i_b)  # path = accepted[0 .. n]
    p_s = conv_state + slot * s_slot + o_c[:, None] * s_c + o_w[None, :] * s_w
    # New column c = element n + 1 + c of (old state ++ path inputs).
    src = n + 1 + o_w
    from_state = src < KW - 1
    old = tl.load(conv_state + slot * s_slot + o_c[:, None] * s_c + tl.minimum(src, KW - 2)[None, :] * s_w,
                  mask=m_c[:, None] & (m_w & from_state)[None, :], other=0.0)
    t = tl.maximum(src - (KW - 1), 0)
    node = tl.load(accepted + i_b * P + tl.minimum(t, P - 1), mask=m_w & ~from_state, other=0)
    xv = tl.load(x + (i_b * N + tl.maximum(node, 0))[None, :] * C + o_c[:, None],
                 mask=m_c[:, None] & (m_w & ~from_state)[None, :], other=0.0)
    new = tl.where(from_state[None, :], old, xv.to(old.dtype))
    if HAS_DST:
        p_s = conv_state + tl.load(dst_idx + i_b).to(tl.int64) * s_slot + o_c[:, None] * s_c + o_w[None, :] * s_w
    tl.debug_barrier()  # every old column is read before any is overwritten
    tl.store(p_s, new.to(conv_state.dtype.element_ty), mask=m_c[:, None] & m_w[None, :])



def tree_conv(x, weight, bias, conv_state, state_idx, parent, activation: bool = True,
              block_n: int = 16, block_c: int = 64, flat=None, x_out=None, split=None):
    """Depthwise causal conv over each node's ancestor window, ``x [bs*N, C]`` (rows may be
    strided, the last dim contiguous) -> ``[bs*N, C]`` in x's dtype (SiLU with ``activation``);
    the conv state is only read. ``flat``: node tiles over the flattened batch (a tree of 17
    nodes costs 17 rows, not 32) instead of per tree; None: :func:`.heuristics.conv_flat`.
    ``x_out`` (``[bs*N, C]`` contiguous, x's dtype): also gets a copy of ``x`` (what the commit
    reads later), written by the same launch. ``split (C1, C2)`` channel counts: returns three
    contiguous tensors instead, ``[bs*N, C1]``, ``[bs*N, C2]`` and ``[bs*N, C - C1 - C2]`` (a GDN
    layer's q, k and v, which its verify reads contiguous), the same values as the columns of
    the single output."""
    bs, N = parent.shape
    if flat is None:
        flat = conv_flat(bs)
    C, KW = weight.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    if x_out is not None and (tuple(x_out.shape) != tuple(x.shape) or x_out.dtype != x.dtype
                              or not x_out.is_contiguous()):
        raise ValueError(f"tree_conv: x_out must be a contiguous {tuple(x.shape)} {x.dtype} tensor, got "
                         f"{tuple(x_out.shape)} {x_out.dtype}")
    T = bs * N
    if split is not None:
        c1, c2 = int(split[0]), int(split[0]) + int(split[1])
        if not (0 < c1 <= c2 <= C):
            raise ValueError(f"tree_conv: split {tuple(split)} does not fit {C} channels")
    else:
        c1 = c2 = C
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if flat:
        grid = (triton.cdiv(C, block_c), triton.cdiv(bs * N, block_n))
    else:
        grid = (triton.cdiv(C, block_c), triton.cdiv(N, block_n), bs)
    _tree_conv_kernel[grid](
        x, weight.contiguous(), bias if bias is not None else weight, conv_state,
        state_idx.to(torch.int32).contiguous(), parent.to(torch.int32).contiguous(), out,
        x_out if x_out is not None else out, T, N, C, x.stride(0),
        *conv_state.stride(), c1, c2, KW=KW, HAS_BIAS=bias is not None, SILU=activation, BN=block_n, BC=block_c,
        FLAT=bool(flat), COPY_X=x_out is not None, SPLIT=split is not None,
        **conv_product_dtypes(x.dtype, weight.dtype, conv_state.dtype),
    )
    if split is None:
        return out
    flat_out = out.view(-1)
    return (flat_out[: T * c1].view(T, c1), flat_out[T * c1: T * c2].view(T, c2 - c1),
            flat_out[T * c2:].view(T, C - c2))


def tree_conv_commit(x, conv_state, state_idx, accepted, accept_len, block_c: int = 64, dst_idx=None) -> None:
    """New conv state (the last W-1 inputs along the accepted path) written in place, or into slot
    ``dst_idx[b]`` (-1: skip) with the request's own slot only read."""
    tree_conv_commit_layers(x.contiguous().unsqueeze(0), conv_state.unsqueeze(0), state_idx, accepted, accept_len,
                            block_c=block_c, dst_idx=dst_idx)


def tree_conv_commit_layers(x, conv_state, state_idx, accepted, accept_len, block_c: int = 64, dst_idx=None) -> None:
    """:func:`tree_conv_commit` for ``L`` layers in one launch: ``x [L, T, C]`` (each layer
    contiguous), ``conv_state [L, slots, C, W-1]`` (any strides, the same for every layer).
    Raises ValueError for a layer of x that is not contiguous."""
    L, T, C = x.shape
    bs = accepted.shape[0]
    W1 = conv_state.shape[3]
    _tree_conv_commit_kernel[(triton.cdiv(C, block_c), bs, L)](
        x, conv_state, state_idx.to(torch.int32).contiguous(),
        accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(), dst_arg(dst_idx, state_idx),
        T // bs, C, *conv_state.stride()[1:], layer_stride(x, (T, C)), int(conv_state.stride(0)) if L > 1 else 0,
        KW=W1 + 1, P=accepted.shape[1], BC=block_c, BW=max(2, triton.next_power_of_2(W1)),
        HAS_DST=dst_idx is not None,
    )
