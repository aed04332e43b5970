"""Tree GatedDeltaNet state commit (Triton): after acceptance, each request's recurrent state of
its last accepted node, rebuilt from the verify's ``u`` and ``G`` and written in place.

``S = exp(G_last) S0 + sum over the path of exp(G_last - G_s) kn_s u_s^T`` (at most L + 1 terms;
:func:`.naive.gdn_commit_state`). Shapes as in :mod:`.verify`; besides them:

    accepted   [bs, P]   verify positions of the accepted path, root first, -1 padded
    accept_len [bs]      accepted drafts (the path has ``accept_len + 1`` nodes)
    dst_idx    [bs]      optional: write into slot ``dst_idx[b]`` instead (-1: skip the request);
                         the request's own slot is then only read

The ``*_layers`` forms commit ``L`` layers in one launch over buffers stacked on a leading layer
dimension (each layer contiguous, any layer stride).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .dots import conv_product_dtypes, dst_arg, head_tile, layer_stride, round_to


@triton.jit
def _commit_prologue(state, state_idx, g_buf, accepted, accept_len, N,
                     H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                     P: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """Commit kernels' shared start: this program's state tile, the path length and the decayed
    committed state ``exp(G_last) S0`` the path terms are added to."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = head_tile(state_idx, H, HV, K, V, BK, BV, READ_ONLY=False)
    p_s = state + ((slot * HV + i_hv) * V + o_v[None, :]).to(tl.int64) * K + o_k[:, None]
    m_s = m_k[:, None] & m_v[None, :]
    n_acc = tl.load(accept_len + i_b)
    tok0 = i_b * N
    last = tl.load(accepted + i_b * P + n_acc)
    G_last = tl.load(g_buf + (tok0 + last) * HV + i_hv)
    S = tl.exp(G_last) * tl.load(p_s, mask=m_s, other=0.0).to(tl.float32)
    return i_b, i_hv, i_h, o_k, o_v, m_k, m_v, p_s, m_s, n_acc, tok0, G_last, S


@triton.jit
def _commit_store(state, p_s, m_s, S, dst_idx, i_b, i_hv, o_k, o_v, HV: tl.constexpr, K: tl.constexpr,
                  V: tl.constexpr, HAS_DST: tl.constexpr):
    """Commit kernels' shared end: the state tile into the request's slot, or into
    ``dst_idx[b]`` (``HAS_DST``; the caller returned early for -1)."""
    if HAS_DST:
        dst = tl.load(dst_idx + i_b).to(tl.int64)
        p_s = state + ((dst * HV + i_hv) * V + o_v[None, :]).to(tl.int64) * K + o_k[:, None]
    tl.store(p_s, S.to(state.dtype.element_ty), mask=m_s)


@triton.jit
def _path_term(accepted, g_buf, i_b, i_hv, tok0, t, n_acc, G_last, HV: tl.constexpr, P: tl.constexpr):
    """Path index t: its verify position (0 when off the path) and weight exp(G_last - G_node)
    (0 when off the path)."""
    node = tl.load(accepted + i_b * P + t)
    on = (t <= n_acc) & (node >= 0)
    node = tl.where(on, node, 0)
    w = tl.where(on, tl.exp(G_last - tl.load(g_buf + (tok0 + node) * HV + i_hv)), 0.0)
    return node, w


@triton.jit
def _tree_gdn_commit_kernel(
    state, state_idx, u_buf, g_buf, k, accepted, accept_len, dst_idx,
    N, l_state, l_u, l_g, l_k,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    P: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, HAS_DST: tl.constexpr,
):
    """Grid (V tiles, bs * HV, layers): program_id(2) picks the layer, whose state pool, u, G
    and keys start ``l_*`` elements after the previous layer's (0 for one layer). ``HAS_DST``:
    write into slot ``dst_idx[b]`` (-1: skip) instead of the request's own."""
    if HAS_DST:
        if tl.load(dst_idx + tl.program_id(1) // HV) < 0:
            return
    layer = tl.program_id(2).to(tl.int64)
    state += layer * l_state
    u_buf += layer * l_u
    g_buf += layer * l_g
    k += layer * l_k
    i_b, i_hv, i_h, o_k, o_v, m_k, m_v, p_s, m_s, n_acc, tok0, G_last, S = _commit_prologue(
        state, state_idx, g_buf, accepted, accept_len, N, H, HV, K, V, P, BK, BV)
    for t in range(P):
        if t <= n_acc:  # the path's nodes only (the others' terms are 0): skip their loads and products
            node, w = _path_term(accepted, g_buf, i_b, i_hv, tok0, t, n_acc, G_last, HV, P)
            kr = tl.load(k + ((tok0 + node) * H + i_h) * K + o_k, mask=m_k, other=0.0).to(tl.float32)
            kn = kr / tl.sqrt(tl.sum(kr * kr, 0) + 1e-6)  # the verify kernel's normalisation
            u = tl.load(u_buf + ((tok0 + node) * HV + i_hv) * V + o_v, mask=m_v, other=0.0)
            S += w * kn[:, None] * u[None, :]
    _commit_store(state, p_s, m_s, S, dst_idx, i_b, i_hv, o_k, o_v, HV, K, V, HAS_DST)


@triton.jit
def _tree_gdn_commit_from_x_kernel(
    state, state_idx, u_buf, g_buf, x, w_tab, b_tab, conv_state, accepted, accept_len, dst_idx,
    N, C, k_off, s_slot, s_c, s_w, l_state, l_u, l_g, l_x, l_conv,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, KW: tl.constexpr,
    P: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, HAS_BIAS: tl.constexpr,
    PX: tl.constexpr, PS: tl.constexpr, HAS_DST: tl.constexpr,
):
    """``_tree_gdn_commit_kernel`` without saved keys: each path node's key is recomputed from
    the layer's pre-conv inputs ``x [T, C]`` (channels ``k_off + h * K ..``), the conv weights
    and the request's *committed* conv state (read before the conv commit rewrites it), exactly
    as ``conv._tree_conv_kernel`` formed it (same tap order, products rounded the same way), then
    SiLU and L2-normalised as the verify did — so the verify need not keep the keys.

    Grid (V tiles, bs * HV, layers): program_id(2) picks the layer; its state pool, u, G, x and
    conv pool start ``l_*`` elements after the previous layer's, and its conv weight / bias are
    at the addresses in ``w_tab`` / ``b_tab`` (int64, one per layer: the model's own parameters,
    not copies). ``HAS_DST``: write into slot ``dst_idx[b]`` instead of the request's own (-1:
    skip), e.g. prefix-cache tracking."""
    if HAS_DST:
        if tl.load(dst_idx + tl.program_id(1) // HV) < 0:
            return
    layer = tl.program_id(2).to(tl.int64)
    state += layer * l_state
    u_buf += layer * l_u
    g_buf += layer * l_g
    x += layer * l_x
    conv_state += layer * l_conv
    w = tl.load(w_tab + layer).to(tl.pointer_type(x.dtype.element_ty))
    i_b, i_hv, i_h, o_k, o_v, m_k, m_v, p_s, m_s, n_acc, tok0, G_last, S = _commit_prologue(
        state, state_idx, g_buf, accepted, accept_len, N, H, HV, K, V, P, BK, BV)
    slot = tl.load(state_idx + i_b).to(tl.int64)
    ch = k_off + i_h * K + o_k
    for t in range(P):
        if t <= n_acc:  # the path's nodes only (the others' terms are 0): skip their loads and products
            node, w_t = _path_term(accepted, g_buf, i_b, i_hv, tok0, t, n_acc, G_last, HV, P)
            acc = tl.zeros([BK], dtype=tl.float32)
            if HAS_BIAS:
                bias = tl.load(b_tab + layer).to(tl.pointer_type(x.dtype.element_ty))
                acc += tl.load(bias + ch, mask=m_k, other=0.0).to(tl.float32)
            for j in tl.static_range(KW):
                # Tap j (0 = the node) is path index t - j; before the root it reads the committed
                # conv state from its newest column backwards.
                src_t = t - j
                src = tl.load(accepted + i_b * P + tl.maximum(src_t, 0))
                xv = tl.load(x + (tok0 + tl.maximum(src, 0)) * C + ch, mask=m_k & (src_t >= 0), other=0.0).to(tl.float32)
                col = (KW - 1) + src_t
                sv = tl.load(conv_state + slot * s_slot + ch * s_c + tl.maximum(col, 0) * s_w,
                             mask=m_k & (src_t < 0) & (col >= 0), other=0.0).to(tl.float32)
                wc = tl.load(w + ch * KW + (KW - 1 - j), mask=m_k, other=0.0).to(tl.float32)
                acc += tl.where(src_t >= 0, round_to(xv * wc, PX), round_to(sv * wc, PS))
            acc = acc / (1.0 + tl.exp(-acc))
            kr = round_to(acc, x.dtype.element_ty)
            kn = kr / tl.sqrt(tl.sum(kr * kr, 0) + 1e-6)
            u = tl.load(u_buf + ((tok0 + node) * HV + i_hv) * V + o_v, mask=m_v, other=0.0)
            S += w_t * kn[:, None] * u[None, :]
    _commit_store(state, p_s, m_s, S, dst_idx, i_b, i_hv, o_k, o_v, HV, K, V, HAS_DST)



def tree_gdn_commit(state, state_idx, u, G, k, accepted, accept_len, block_v: int = 32, dst_idx=None) -> None:
    """Write each request's accepted-node state into ``state[state_idx[b]]`` in place (or into
    ``dst_idx[b]``). ``state [slots, HV, V, K]`` fp32; ``u [bs, N, HV, V]``, ``G [bs, N, HV]``
    from :func:`.verify.tree_gdn_verify`; ``k [T, H, K]`` the raw keys given to it."""
    tree_gdn_commit_layers(state.unsqueeze(0), state_idx, u.unsqueeze(0), G.unsqueeze(0), k.contiguous().unsqueeze(0),
                           accepted, accept_len, block_v=block_v, dst_idx=dst_idx)


def tree_gdn_commit_layers(state, state_idx, u, G, k, accepted, accept_len, block_v: int = 32, dst_idx=None) -> None:
    """:func:`tree_gdn_commit` for ``L`` layers in one launch: ``state [L, slots, HV, V, K]``,
    ``u [L, bs, N, HV, V]``, ``G [L, bs, N, HV]``, ``k [L, T, H, K]``. Raises ValueError for a
    layer that is not contiguous."""
    L, bs, N, HV, V = u.shape
    H, K = k.shape[2], k.shape[3]
    P = accepted.shape[1]
    BK = max(16, triton.next_power_of_2(K))
    BV = min(max(16, triton.next_power_of_2(V)), block_v)
    l_state = layer_stride(state, state.shape[1:])
    _tree_gdn_commit_kernel[(triton.cdiv(V, BV), bs * HV, L)](
        state, state_idx.to(torch.int32).contiguous(), u, G, k,
        accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(), dst_arg(dst_idx, state_idx), N,
        l_state, layer_stride(u, (bs, N, HV, V)), layer_stride(G, (bs, N, HV)), layer_stride(k, k.shape[1:]),
        H=H, HV=HV, K=K, V=V, P=P, BK=BK, BV=BV, HAS_DST=dst_idx is not None, num_warps=4,
    )


def conv_weight_tables(weights, biases, dtype, device):
    """``(w_tab, b_tab)``: int64 device tensors of the addresses of each layer's conv weight
    ``[C, W]`` and bias (``b_tab`` None without biases), for :func:`tree_gdn_commit_from_x_layers`.
    The kernels read the model's own parameters through them (no copies to go stale). Each table's
    ``points_into`` attribute holds the tensors its addresses point into (the Triton interpreter's
    bounds check of the kernel tests reads it). Raises ValueError unless every weight is a
    contiguous ``[C, W]`` of ``dtype`` and every layer or none has a contiguous bias of ``dtype``."""
    C, KW = weights[0].shape
    if any(w.shape != (C, KW) or not w.is_contiguous() or w.dtype != dtype for w in weights):
        raise ValueError(f"conv_weight_tables: contiguous [{C}, {KW}] {dtype} conv weights expected")
    has_bias = biases[0] is not None
    if any((b is not None) != has_bias or (b is not None and (b.dtype != dtype or not b.is_contiguous()))
           for b in biases):
        raise ValueError(f"conv_weight_tables: every layer or no layer has a contiguous {dtype} bias")
    w_tab = torch.tensor([w.data_ptr() for w in weights], dtype=torch.int64, device=device)
    b_tab = torch.tensor([b.data_ptr() for b in biases], dtype=torch.int64, device=device) if has_bias else None
    w_tab.points_into = tuple(weights)
    if b_tab is not None:
        b_tab.points_into = tuple(biases)
    return w_tab, b_tab


def tree_gdn_commit_from_x_layers(state, state_idx, u, G, x, w_tab, b_tab, conv_width: int, conv_state,
                                  k_offset: int, num_k_heads: int, accepted, accept_len, block_v: int = 32,
                                  dst_idx=None) -> None:
    """:func:`tree_gdn_commit_layers` that recomputes the path's keys from the pre-conv inputs
    ``x [L, T, C]`` (key channels from ``k_offset``, ``num_k_heads`` heads of the state's key
    dim), each layer's conv weight ``[C, conv_width]`` and bias (:func:`conv_weight_tables`, of
    x's dtype) and the requests' conv state ``conv_state [L, slots, C, W-1]`` (any strides), as
    :func:`.conv.tree_conv` forms them (SiLU), so the verify need not keep the keys. Call it
    *before* :func:`.conv.tree_conv_commit_layers` rewrites the conv state. Raises ValueError for
    weight tables of another length."""
    L, bs, N, HV, V = u.shape
    K = state.shape[-1]
    T, C = x.shape[1], x.shape[2]
    if w_tab.shape != (L,) or (b_tab is not None and b_tab.shape != (L,)):
        raise ValueError(f"tree_gdn_commit_from_x_layers: weight tables for {L} layers expected")
    P = accepted.shape[1]
    BK = max(16, triton.next_power_of_2(K))
    BV = min(max(16, triton.next_power_of_2(V)), block_v)
    _tree_gdn_commit_from_x_kernel[(triton.cdiv(V, BV), bs * HV, L)](
        state, state_idx.to(torch.int32).contiguous(), u, G, x, w_tab, b_tab if b_tab is not None else w_tab,
        conv_state, accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(),
        dst_arg(dst_idx, state_idx), N, C, int(k_offset), *conv_state.stride()[1:],
        layer_stride(state, state.shape[1:]), layer_stride(u, (bs, N, HV, V)), layer_stride(G, (bs, N, HV)),
        layer_stride(x, (T, C)), int(conv_state.stride(0)) if L > 1 else 0,
        H=int(num_k_heads), HV=HV, K=K, V=V, KW=int(conv_width), P=P, BK=BK, BV=BV, HAS_BIAS=b_tab is not None,
        # The tables hold weights of x's dtype (conv_weight_tables checks; the kernel reads them so).
        **conv_product_dtypes(x.dtype, x.dtype, conv_state.dtype),
        HAS_DST=dst_idx is not None, num_warps=4,
    )
