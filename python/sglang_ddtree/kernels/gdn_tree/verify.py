"""Tree GatedDeltaNet verify (Triton): every node's output of ``bs`` draft trees against the
committed recurrent state, and what the state commit needs, without per-node state snapshots.

The math is the tree WY form of :mod:`.naive` (:func:`.naive.gdn_tree_wy`): per request and
value head one triangular solve over the tree's nodes in topological order with the ancestor
mask, decays taken along each node's path. Layouts follow sglang's Qwen3.5 GDN layer in
TARGET_VERIFY (``bs`` requests of ``N`` verify positions, tokens request-major, ``T = bs * N``):

    q, k       [T, H, K]        raw; L2-normalised here (eps 1e-6, as sglang)
    v          [T, HV, V]       HV a multiple of H (value head h reads key head h // (HV // H))
    a, b       [T, HV]          raw gate inputs: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b);
                                any row stride shared by both, columns contiguous (else copied)
    A_log, dt_bias [HV]
    anc        [bs, N, N]       bool/uint8 ancestor mask, self included
    state      [slots, HV, V, K] fp32 recurrent state pool (sglang's transposed layout); only read
    state_idx  [bs]             each request's slot; negative (sglang's PAD_SLOT_ID): a padded row,
                                read from slot 0, its outputs meaningless

Outputs: ``o [T, HV, V]`` in v's dtype, and for :mod:`.commit` ``u [bs, N, HV, V]`` (the solved
values) and ``G [bs, N, HV]`` (path decays), both fp32.

Three implementations: "fused" (one program per value head and V tile walks the node chunks in
order, forming each chunk's state products on the way), "split" (every chunk's state products
and decays in one parallel pass, then the walk does only the substitution) and "twostage" (trees
of at most 65 nodes: the V-independent ``(I + A)^-1`` of the non-root nodes per request and head
first, then the root and every other node at once). Node-pair products come from their own
kernel, or for "twostage" optionally from its prep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl

from .dots import dot16, dotf, head_tile, load_rows, softplus, split2, split3
from .heuristics import apply_as_dependent, block_chunk, pdl_unavailable, pick_impl, prep_forms_pairs, register_limit

# Triton ``input_precision`` of the products with q/k on one side (``VerifyOptions.precision``).
PRECISIONS = ("bf16x3", "tf32x3", "ieee")
# Precision of the products of two fp32 tiles (``VerifyOptions.solve_precision``, :func:`.dots.dotf`).
SOLVE_PRECISIONS = ("tf32x3", "bf16x3", "ieee")
IMPLS = ("auto", "fused", "split", "twostage")


@dataclass(frozen=True)
class VerifyOptions:
    """How :func:`tree_gdn_verify` runs: none of these changes what is computed, only its rounding
    and speed. ``None`` leaves the choice to :mod:`.heuristics` or to the default named.

    - ``impl``: "fused", "split", "twostage" (trees of at most 65 nodes) or "auto" (``pick_impl``).
    - ``precision``: products with raw q/k: "bf16x3" (bf16 q/k: exact bf16 passes; else "tf32x3"), "tf32x3", "ieee".
    - ``solve_precision``: products of two fp32 tiles: "bf16x3" (~2^-16), "tf32x3" (~2^-21) or "ieee".
    - ``state_parts``: bf16 parts of the state in the bf16x3 state products: 3 (fp32-accurate) or 2 (~2^-16).
    - ``pairs_in_prep``: the node-pair products formed where they are used (no pair kernel): by the "twostage"
      prep, or by the "fused" walk on a tree of one node chunk (``N <= block_t``; ignored otherwise); None:
      ``prep_forms_pairs``.
    - ``pdl``: "twostage", sm_90+: its apply pass is a programmatic dependent of its prep; None: ``apply_as_dependent``.
    - ``block_v``: value tile, a power of two; None: 64, or the "auto" choice.
    - ``block_t``: node chunk of "fused" / "split", a power of two of at least 16.
    - ``qk_block``: node tile of the pair-product kernel; None: the "auto" choice, else 64 for "twostage", else ``block_t``.
    - ``num_warps``: warps of the verify kernels; None: 4.
    - ``prep_warps``: warps of the "twostage" prep kernel; None: ``num_warps``.
    - ``max_registers``: "twostage", 0 .. 255: Triton's ``maxnreg`` (0: the compiler's own); None: ``register_limit``.

    ``solve_precision=None``: "bf16x3" under ``precision="bf16x3"`` with bf16 q/k, "ieee" under "ieee", else "tf32x3";
    ``state_parts=None``: 2 under "bf16x3", else 3. Raises ValueError for a value outside the ones named.
    """
    impl: str = "auto"
    precision: str = "bf16x3"
    solve_precision: Optional[str] = None
    state_parts: Optional[int] = None
    pairs_in_prep: Optional[bool] = None
    pdl: Optional[bool] = None
    block_v: Optional[int] = None
    block_t: int = 16
    qk_block: Optional[int] = None
    num_warps: Optional[int] = None
    prep_warps: Optional[int] = None
    max_registers: Optional[int] = None

    def __post_init__(self):
        if self.impl not in IMPLS:
            raise ValueError(f"tree_gdn_verify: impl must be 'auto', 'fused', 'split' or 'twostage', got {self.impl!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"tree_gdn_verify: precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.solve_precision is not None and self.solve_precision not in SOLVE_PRECISIONS:
            raise ValueError(f"tree_gdn_verify: solve_precision must be one of {SOLVE_PRECISIONS}, "
                             f"got {self.solve_precision!r}")
        if self.max_registers is not None and not 0 <= int(self.max_registers) <= 255:
            raise ValueError(f"tree_gdn_verify: max_registers must be 0 (the compiler's) .. 255, got {self.max_registers}")
        if self.state_parts is not None and int(self.state_parts) not in (2, 3):
            raise ValueError(f"tree_gdn_verify: state_parts must be 2 or 3, got {self.state_parts}")


@triton.jit
def _pair_block(p_q, p_k, anc_b, rows, cols, N, scale, H: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
                PREC: tl.constexpr, RAW16: tl.constexpr):
    """The node-pair products ``kn_i.kn_j`` and ``qn_i.kn_j`` of a [BT, BT] block of one request
    and key head (fp32, 0 off the ancestor pairs and past the tree). RAW16 (bf16 q/k): one bf16
    tensor-core product of the raw rows, exact in the fp32 accumulator, scaled by the norms
    afterwards (else PREC on the normalised fp32 rows)."""
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    m_r = rows < N
    m_c = cols < N
    k_i, rk_i = load_rows(p_k, rows, m_r, o_k, m_k, H * K, 1.0, RAW16)
    q_i, rq_i = load_rows(p_q, rows, m_r, o_k, m_k, H * K, scale, RAW16)
    k_j, rk_j = load_rows(p_k, cols, m_c, o_k, m_k, H * K, 1.0, RAW16)
    anc_ij = tl.load(anc_b + rows[:, None] * N + cols[None, :], mask=m_r[:, None] & m_c[None, :], other=0) != 0
    if RAW16:
        kk = dot16(k_i, tl.trans(k_j), RAW16)
        qk = dot16(q_i, tl.trans(k_j), RAW16)
    else:
        kk = dotf(k_i, tl.trans(k_j), PREC)
        qk = dotf(q_i, tl.trans(k_j), PREC)
    kk = tl.where(anc_ij, kk * rk_i[:, None] * rk_j[None, :], 0.0)
    qk = tl.where(anc_ij, qk * rq_i[:, None] * rk_j[None, :], 0.0)
    return kk, qk


@triton.jit
def _tree_qk_kernel(
    q, k, anc, kk_buf, qk_buf, N, NP, scale,
    H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
    RAW16: tl.constexpr,
):
    """Grid (NT, NT, bs * H): one [BT, BT] block (i, j <= i) of the per-key-head products
    kn kn^T and qn kn^T over ancestor pairs (others stored as 0), fp32, into ``[bs, H, NP, NP]``."""
    i = tl.program_id(0)
    j = tl.program_id(1)
    if j > i:
        return
    i_bh = tl.program_id(2)
    i_b = i_bh // H
    i_h = i_bh % H
    o_t = tl.arange(0, BT)
    rows = i * BT + o_t
    cols = j * BT + o_t
    tok0 = i_b * N
    kk, qk = _pair_block(q + (tok0 * H + i_h) * K, k + (tok0 * H + i_h) * K, anc + i_b.to(tl.int64) * N * N,
                         rows, cols, N, scale, H, K, BK, PREC, RAW16)
    off = (i_bh.to(tl.int64) * NP + rows[:, None]) * NP + cols[None, :]
    m = (rows < NP)[:, None] & (cols < NP)[None, :]
    tl.store(kk_buf + off, kk, mask=m)
    tl.store(qk_buf + off, qk, mask=m)


@triton.jit
def _chunk_decay(a, anc_b, a_neg, dtb, tok0, i_hv, n_chunks, rows, m_r, o_t, N, s_ab, BT: tl.constexpr):
    """Path decay ``G[t]`` = sum of g over t's ancestors (self included) for the chunk's rows,
    reading chunks ``0 .. n_chunks - 1`` (ancestors precede, so any bound past the row's own
    chunk is exact). ``s_ab``: the row stride of ``a`` (and ``b``)."""
    G_i = tl.zeros([BT], dtype=tl.float32)
    for j in range(n_chunks):
        cols = j * BT + o_t
        m_c = cols < N
        a_j = tl.load(a + (tok0 + cols) * s_ab + i_hv, mask=m_c, other=0.0).to(tl.float32)
        g_j = tl.where(m_c, a_neg * softplus(a_j + dtb), 0.0)
        anc_ij = tl.load(anc_b + rows[:, None] * N + cols[None, :], mask=m_r[:, None] & m_c[None, :], other=0) != 0
        G_i += tl.sum(tl.where(anc_ij, g_j[None, :], 0.0), 1)
    return G_i


@triton.jit
def _chunk_state_products(p_k, p_q, state, slot, i_hv, rows, m_r, o_v, m_v, scale,
                          H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                          BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, BKC: tl.constexpr,
                          PREC: tl.constexpr, RAW16: tl.constexpr, PARTS: tl.constexpr = 3):
    """``kn S0`` and ``scale * qn S0`` for the chunk's rows ([BT, BV] each, normalised keys and
    queries), over K in slices of BKC so only [BT, BKC] tiles are live. The raw rows go into the products and the norms scale
    the results. RAW16 (bf16 q/k, exact bf16 operands): each state slice split in PARTS (3 or
    2) bf16 parts, one bf16 tensor-core product each (3: fp32-accurate, half the tensor-core
    time of tf32x3's three tf32 passes; 2: the state to ~16 bits, a third less); else PREC on
    fp32 operands."""
    kss = tl.zeros([BT], dtype=tl.float32)
    qss = tl.zeros([BT], dtype=tl.float32)
    kS = tl.zeros([BT, BV], dtype=tl.float32)
    qS = tl.zeros([BT, BV], dtype=tl.float32)
    for kc in tl.static_range(0, BK, BKC):
        o_kc = kc + tl.arange(0, BKC)
        m_kc = m_r[:, None] & (o_kc < K)[None, :]
        # Keep this order (both loads, both norms, then the state slice): other orders spill
        # more (AOT-compiled).
        kr = tl.load(p_k + rows[:, None] * (H * K) + o_kc[None, :], mask=m_kc, other=0.0)
        krf = kr.to(tl.float32)
        qr = tl.load(p_q + rows[:, None] * (H * K) + o_kc[None, :], mask=m_kc, other=0.0)
        qrf = qr.to(tl.float32)
        kss += tl.sum(krf * krf, 1)
        qss += tl.sum(qrf * qrf, 1)
        S0c = tl.load(state + ((slot * HV + i_hv) * V + o_v[None, :]).to(tl.int64) * K + o_kc[:, None],
                      mask=(o_kc < K)[:, None] & m_v[None, :], other=0.0).to(tl.float32)
        if RAW16:
            if PARTS == 2:
                s1, s2 = split2(S0c)
                kS += dot16(kr, s2, RAW16) + dot16(kr, s1, RAW16)
                qS += dot16(qr, s2, RAW16) + dot16(qr, s1, RAW16)
            else:
                s1, s2, s3 = split3(S0c)
                kS += dot16(kr, s1, RAW16) + dot16(kr, s2, RAW16) + dot16(kr, s3, RAW16)
                qS += dot16(qr, s1, RAW16) + dot16(qr, s2, RAW16) + dot16(qr, s3, RAW16)
        else:
            kS += dotf(krf, S0c, PREC)
            qS += dotf(qrf, S0c, PREC)
    return kS * (1.0 / tl.sqrt(kss + 1e-6))[:, None], qS * (scale / tl.sqrt(qss + 1e-6))[:, None]


@triton.jit
def _chunk_beta(b, tok0, i_hv, rows, m_r, s_ab):
    """``beta = sigmoid(b)`` of a chunk's rows ([BT], 0 on rows past the tree)."""
    b_i = tl.load(b + (tok0 + rows) * s_ab + i_hv, mask=m_r, other=0.0).to(tl.float32)
    return tl.where(m_r, 1.0 / (1.0 + tl.exp(-b_i)), 0.0)


@triton.jit
def _pairs_to_AQ(kk, qk, m_r, o_t, G_i, beta_i):
    """A chunk's diagonal block from its pair products (0 off the ancestor pairs): ``A``
    (strictly lower: ``beta_i exp(G_i - G_j) kn_i.kn_j``) and the decayed ``qn_i.kn_j`` (self
    included), [BT, BT] each."""
    m_p = m_r[:, None] & m_r[None, :] & (o_t[:, None] >= o_t[None, :])
    # Finite off the ancestor pairs too (inf * 0 = NaN): G_i - G_j <= 0 on ancestor pairs.
    dec = tl.exp(tl.minimum(tl.where(m_p, G_i[:, None] - G_i[None, :], 0.0), 0.0))
    return tl.where(o_t[:, None] == o_t[None, :], 0.0, beta_i[:, None] * dec * kk), qk * dec


@triton.jit
def _diag_pairs(kk_buf, qk_buf, pair0, rows, m_r, o_t, G_i, beta_i, NP):
    """:func:`_pairs_to_AQ` of a chunk's diagonal block read from the pair buffers. They hold
    only the pair kernel's tiles on and below the diagonal, and its tile may be smaller than
    this chunk: never read above the diagonal."""
    m_p = m_r[:, None] & m_r[None, :] & (o_t[:, None] >= o_t[None, :])
    p_pair = pair0 + rows[:, None] * NP + rows[None, :]
    kk = tl.load(kk_buf + p_pair, mask=m_p, other=0.0)
    qk = tl.load(qk_buf + p_pair, mask=m_p, other=0.0)
    return _pairs_to_AQ(kk, qk, m_r, o_t, G_i, beta_i)


@triton.jit
def _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, s_ab, HV: tl.constexpr, V: tl.constexpr):
    """A chunk's ``beta``, right-hand side ``beta (v - exp(G) kS)`` and output start
    ``exp(G) qS`` ([BT], [BT, BV], [BT, BV]) from its state products."""
    beta_i = _chunk_beta(b, tok0, i_hv, rows, m_r, s_ab)
    eG_i = tl.exp(G_i)
    v_i = tl.load(v + ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :],
                  mask=m_r[:, None] & m_v[None, :], other=0.0).to(tl.float32)
    return beta_i, beta_i[:, None] * (v_i - eG_i[:, None] * kS), eG_i[:, None] * qS


@triton.jit
def _chunk_solve(rhs, acc, beta_i, G_i, kk_buf, qk_buf, o, u_buf, g_buf, tok0, pair0, i_v, i_hv, i, rows,
                 m_r, o_t, o_v, m_v, N, NP, HV: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                 NSQ: tl.constexpr, PREC: tl.constexpr, kk_d=None, qk_d=None, PAIRS: tl.constexpr = False):
    """Chunk ``i``'s forward substitution given its right-hand side and output start
    (:func:`_chunk_rhs`): the earlier chunks have final u; the diagonal block (I + A) u = rhs
    has A strictly lower triangular (parents precede children), so A^L = 0 for paths of at most
    L nodes and (I + A)^-1 = (I - A)(I + A^2)(I + A^4)... (NSQ squarings): the factors commute,
    so they are applied to rhs one by one. Stores o, u
    (and G from the first V tile). PAIRS: the diagonal block's pair products are ``kk_d`` /
    ``qk_d`` (:func:`_pair_block` of the chunk's rows), not read from the pair buffers."""
    for j in range(i):
        cols = j * BT + o_t
        m_c = cols < N
        G_j = tl.load(g_buf + (tok0 + cols) * HV + i_hv, mask=m_c, other=0.0)
        u_j = tl.load(u_buf + ((tok0 + cols[:, None]) * HV + i_hv) * V + o_v[None, :],
                      mask=m_c[:, None] & m_v[None, :], other=0.0)
        m_p = m_r[:, None] & m_c[None, :]
        p_pair = pair0 + rows[:, None] * NP + cols[None, :]
        kk = tl.load(kk_buf + p_pair, mask=m_p, other=0.0)
        qk = tl.load(qk_buf + p_pair, mask=m_p, other=0.0)
        # kk/qk are 0 off the ancestor pairs, but the decay must stay finite there too
        # (inf * 0 = NaN): between branches G_i - G_j can be hundreds with real gates. On
        # ancestor pairs G_i - G_j <= 0 (every g <= 0), so clamping at 0 changes nothing there.
        dec = tl.exp(tl.minimum(tl.where(m_p, G_i[:, None] - G_j[None, :], 0.0), 0.0))
        rhs -= dotf(beta_i[:, None] * dec * kk, u_j, PREC)
        acc += dotf(qk * dec, u_j, PREC)
    if PAIRS:
        A_ii, Q_ii = _pairs_to_AQ(kk_d, qk_d, m_r, o_t, G_i, beta_i)
    else:
        A_ii, Q_ii = _diag_pairs(kk_buf, qk_buf, pair0, rows, m_r, o_t, G_i, beta_i, NP)
    u_i = rhs - dotf(A_ii, rhs, PREC)
    Ap = A_ii
    for _ in tl.static_range(NSQ):  # A^2, A^4, ... up to the path length
        Ap = dotf(Ap, Ap, PREC)
        u_i = u_i + dotf(Ap, u_i, PREC)
    acc += dotf(Q_ii, u_i, PREC)
    tl.store(o + ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :], acc.to(o.dtype.element_ty),
             mask=m_r[:, None] & m_v[None, :])
    tl.store(u_buf + ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :], u_i, mask=m_r[:, None] & m_v[None, :])
    if i_v == 0:
        tl.store(g_buf + (tok0 + rows) * HV + i_hv, G_i, mask=m_r)


@triton.jit
def _tree_gdn_fwd_kernel(
    q, k, v, a, b, A_log, dt_bias, anc, state, state_idx, kk_buf, qk_buf,
    o, u_buf, g_buf,
    N, NP, scale, s_ab,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr, NSQ: tl.constexpr,
    BKC: tl.constexpr, PREC: tl.constexpr, RAW16: tl.constexpr, PARTS: tl.constexpr, PAIRS: tl.constexpr,
):
    """impl "fused": grid (V tiles, bs * HV); each program walks its head's node chunks in
    order, forming each chunk's state products and solving it. The node-pair products come
    precomputed (``_tree_qk_kernel``), so the walk carries [BT, BV] accumulators only; PAIRS (a
    tree of one chunk, ``NT == 1``): the walk forms its chunk's pair products itself."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = head_tile(state_idx, H, HV, K, V, BK, BV)
    o_t = tl.arange(0, BT)
    a_neg = -tl.exp(tl.load(A_log + i_hv).to(tl.float32))
    dtb = tl.load(dt_bias + i_hv).to(tl.float32)
    tok0 = i_b * N
    anc_b = anc + i_b.to(tl.int64) * N * N
    pair0 = (i_b * H + i_h).to(tl.int64) * NP * NP
    p_q = q + (tok0 * H + i_h) * K
    p_k = k + (tok0 * H + i_h) * K
    if PAIRS:  # one chunk: its pair products here, before the state products (NT == 1)
        kk_d, qk_d = _pair_block(p_q, p_k, anc_b, o_t, o_t, N, scale, H, K, BK, PREC, RAW16)
        tri = o_t[:, None] >= o_t[None, :]  # on and below the diagonal, as the pair buffers are read
        kk_d = tl.where(tri, kk_d, 0.0)
        qk_d = tl.where(tri, qk_d, 0.0)
    else:
        kk_d, qk_d = None, None
    for i in range(NT):
        rows = i * BT + o_t
        m_r = rows < N
        G_i = _chunk_decay(a, anc_b, a_neg, dtb, tok0, i_hv, i + 1, rows, m_r, o_t, N, s_ab, BT)
        kS, qS = _chunk_state_products(p_k, p_q, state, slot, i_hv, rows, m_r, o_v, m_v, scale,
                                       H, HV, K, V, BT, BK, BV, BKC, PREC, RAW16, PARTS)
        beta_i, rhs, acc = _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, s_ab, HV, V)
        _chunk_solve(rhs, acc, beta_i, G_i, kk_buf, qk_buf, o, u_buf, g_buf, tok0, pair0, i_v, i_hv, i, rows,
                     m_r, o_t, o_v, m_v, N, NP, HV, V, BT, NSQ, PREC, kk_d, qk_d, PAIRS)
        # Later chunks of this program read u (and G) back through global memory.
        tl.debug_barrier()


@triton.jit
def _tree_state_products_kernel(
    q, k, a, A_log, dt_bias, anc, state, state_idx, ks_buf, qs_buf, g_buf,
    N, scale, s_ab,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr, BKC: tl.constexpr,
    PREC: tl.constexpr, RAW16: tl.constexpr, PARTS: tl.constexpr,
):
    """impl "split", first pass, grid (V tiles, bs * HV, chunks): every chunk's state products
    and path decays at once (nothing here depends on other chunks' results)."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = head_tile(state_idx, H, HV, K, V, BK, BV)
    i = tl.program_id(2)
    o_t = tl.arange(0, BT)
    rows = i * BT + o_t
    m_r = rows < N
    tok0 = i_b * N
    kS, qS = _chunk_state_products(k + (tok0 * H + i_h) * K, q + (tok0 * H + i_h) * K, state, slot, i_hv, rows,
                                   m_r, o_v, m_v, scale, H, HV, K, V, BT, BK, BV, BKC, PREC, RAW16, PARTS)
    off = ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :]
    m_o = m_r[:, None] & m_v[None, :]
    tl.store(ks_buf + off, kS, mask=m_o)
    tl.store(qs_buf + off, qS, mask=m_o)
    if i_v == 0:
        a_neg = -tl.exp(tl.load(A_log + i_hv).to(tl.float32))
        dtb = tl.load(dt_bias + i_hv).to(tl.float32)
        # All chunks: the bound must not depend on program_id (the interpreter needs a number).
        G_i = _chunk_decay(a, anc + i_b.to(tl.int64) * N * N, a_neg, dtb, tok0, i_hv, NT, rows, m_r, o_t, N, s_ab,
                            BT)
        tl.store(g_buf + (tok0 + rows) * HV + i_hv, G_i, mask=m_r)


@triton.jit
def _tree_gdn_solve_kernel(
    b, v, state_idx, ks_buf, qs_buf, kk_buf, qk_buf, o, u_buf, g_buf,
    N, NP, s_ab,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr, NSQ: tl.constexpr, PREC: tl.constexpr,
):
    """impl "split", second pass, grid (V tiles, bs * HV): the sequential forward substitution
    over the chunks, reading the first pass's products: only [BT, BV] / [BT, BT] tiles."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = head_tile(state_idx, H, HV, K, V, BK, BV)
    o_t = tl.arange(0, BT)
    tok0 = i_b * N
    pair0 = (i_b * H + i_h).to(tl.int64) * NP * NP
    for i in range(NT):
        rows = i * BT + o_t
        m_r = rows < N
        off = ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :]
        m_o = m_r[:, None] & m_v[None, :]
        kS = tl.load(ks_buf + off, mask=m_o, other=0.0)
        qS = tl.load(qs_buf + off, mask=m_o, other=0.0)
        G_i = tl.load(g_buf + (tok0 + rows) * HV + i_hv, mask=m_r, other=0.0)
        beta_i, rhs, acc = _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, s_ab, HV, V)
        _chunk_solve(rhs, acc, beta_i, G_i, kk_buf, qk_buf, o, u_buf, g_buf, tok0, pair0, i_v, i_hv, i, rows,
                     m_r, o_t, o_v, m_v, N, NP, HV, V, BT, NSQ, PREC)
        tl.debug_barrier()


@triton.jit
def _root_state_products(p_k, p_q, state, slot, i_hv, o_v, m_v, scale,
                         HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                         BKC: tl.constexpr):
    """``kn S0`` and ``scale * qn S0`` of node 0 alone ([BV] each), by exact fp32 reductions
    over K in slices of BKC (a one-row product is no work for a tensor core)."""
    kss = tl.zeros([BKC], dtype=tl.float32)
    qss = tl.zeros([BKC], dtype=tl.float32)
    kS = tl.zeros([BV], dtype=tl.float32)
    qS = tl.zeros([BV], dtype=tl.float32)
    for kc in tl.static_range(0, BK, BKC):
        o_kc = kc + tl.arange(0, BKC)
        m_kc = o_kc < K
        kr = tl.load(p_k + o_kc, mask=m_kc, other=0.0).to(tl.float32)
        qr = tl.load(p_q + o_kc, mask=m_kc, other=0.0).to(tl.float32)
        kss += kr * kr
        qss += qr * qr
        S0c = tl.load(state + ((slot * HV + i_hv) * V + o_v[None, :]).to(tl.int64) * K + o_kc[:, None],
                      mask=m_kc[:, None] & m_v[None, :], other=0.0).to(tl.float32)
        kS += tl.sum(kr[:, None] * S0c, 0)
        qS += tl.sum(qr[:, None] * S0c, 0)
    return kS * (1.0 / tl.sqrt(tl.sum(kss, 0) + 1e-6)), qS * (scale / tl.sqrt(tl.sum(qss, 0) + 1e-6))


@triton.jit
def _prep_pairs(p_q, p_k, anc_b, rows, m_r, N, scale, H: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
                PREC: tl.constexpr, RAW16: tl.constexpr):
    """The twostage prep's pair products, formed in place: ``kn_i.kn_j`` and ``qn_i.kn_j`` among
    the non-root ``rows`` ([BT, BT], 0 off the ancestor pairs), the root's column ``kn_i.kn_0``,
    ``qn_i.kn_0`` ([BT], 0 where the root is no ancestor: padding) and ``qn_0.kn_0``. Over K in
    32-wide slices of the raw rows (only [BT, 32] tiles live beside the two accumulators), the
    norms applied at the end; RAW16 as in :func:`_pair_block`."""
    BKC: tl.constexpr = 32 if BK > 32 else BK
    kk = tl.zeros([rows.shape[0], rows.shape[0]], dtype=tl.float32)
    qk = tl.zeros([rows.shape[0], rows.shape[0]], dtype=tl.float32)
    qss = tl.zeros([rows.shape[0]], dtype=tl.float32)
    k0k = tl.zeros([rows.shape[0]], dtype=tl.float32)
    k0q = tl.zeros([rows.shape[0]], dtype=tl.float32)
    k0ss = tl.zeros([BKC], dtype=tl.float32)
    q0ss = tl.zeros([BKC], dtype=tl.float32)
    q0k0 = tl.zeros([BKC], dtype=tl.float32)
    for kc in tl.static_range(0, BK, BKC):
        o_kc = kc + tl.arange(0, BKC)
        m_kc = o_kc < K
        m_t = m_r[:, None] & m_kc[None, :]
        kr = tl.load(p_k + rows[:, None] * (H * K) + o_kc[None, :], mask=m_t, other=0.0)
        qr = tl.load(p_q + rows[:, None] * (H * K) + o_kc[None, :], mask=m_t, other=0.0)
        krf = kr.to(tl.float32)
        qrf = qr.to(tl.float32)
        if RAW16:
            kk += dot16(kr, tl.trans(kr), RAW16)
            qk += dot16(qr, tl.trans(kr), RAW16)
        else:
            kk += dotf(krf, tl.trans(krf), PREC)
            qk += dotf(qrf, tl.trans(krf), PREC)
        qss += tl.sum(qrf * qrf, 1)
        k_0r = tl.load(p_k + o_kc, mask=m_kc, other=0.0)
        k_0 = k_0r.to(tl.float32)
        q_0 = tl.load(p_q + o_kc, mask=m_kc, other=0.0).to(tl.float32)
        # The root's column as a product too (its key in the first of 16 columns): an
        # elementwise row reduction here would need the rows in a second register layout.
        if RAW16:
            b0 = tl.where(tl.arange(0, 16)[None, :] == 0, k_0r[:, None], 0.0).to(k_0r.dtype)
            k0k += tl.sum(dot16(kr, b0, RAW16), 1)
            k0q += tl.sum(dot16(qr, b0, RAW16), 1)
        else:
            b0 = tl.where(tl.arange(0, 16)[None, :] == 0, k_0[:, None], 0.0)
            k0k += tl.sum(dotf(krf, b0, PREC), 1)
            k0q += tl.sum(dotf(qrf, b0, PREC), 1)
        k0ss += k_0 * k_0
        q0ss += q_0 * q_0
        q0k0 += q_0 * k_0
    # |k_i|^2 is kk's diagonal (exact like every raw product).
    kss = tl.sum(tl.where(rows[:, None] == rows[None, :], kk, 0.0), 1)
    rk = 1.0 / tl.sqrt(kss + 1e-6)
    rq = scale / tl.sqrt(qss + 1e-6)
    rk0 = 1.0 / tl.sqrt(tl.sum(k0ss, 0) + 1e-6)
    anc_ij = tl.load(anc_b + rows[:, None] * N + rows[None, :], mask=m_r[:, None] & m_r[None, :], other=0) != 0
    m_a = m_r & (tl.load(anc_b + rows * N, mask=m_r, other=0) != 0)
    kk = tl.where(anc_ij, kk * rk[:, None] * rk[None, :], 0.0)
    qk = tl.where(anc_ij, qk * rq[:, None] * rk[None, :], 0.0)
    qk_00 = tl.sum(q0k0, 0) * rk0 * (scale / tl.sqrt(tl.sum(q0ss, 0) + 1e-6))
    return kk, qk, tl.where(m_a, k0k * rk * rk0, 0.0), tl.where(m_a, k0q * rq * rk0, 0.0), qk_00


@triton.jit
def _unit_lower_inverse(A, eye, NSQ: tl.constexpr, PREC: tl.constexpr):
    """``(I + A)^-1`` of a strictly lower triangular (nilpotent) A with ``A^(2^(NSQ+1)) = 0``:
    ``(I - A)(I + A^2)(I + A^4)...``, NSQ squarings (the dependent chain)."""
    Tm = tl.where(eye, 1.0, 0.0) - A
    Ap = A
    for _ in tl.static_range(NSQ):  # T = (I - A)(I + A^2)(I + A^4)...
        Ap = dotf(Ap, Ap, PREC)
        Tm = Tm + dotf(Ap, Tm, PREC)
    return Tm


@triton.jit
def _tree_twostage_prep_kernel(
    q, k, a, b, A_log, dt_bias, anc, kk_buf, qk_buf, g_buf, t_buf, qc_buf, c_buf,
    N, NP, scale, s_ab,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, NSQ: tl.constexpr,
    PREC: tl.constexpr, RAW16: tl.constexpr, PAIRS: tl.constexpr, PDL: tl.constexpr,
):
    """impl "twostage", first pass, grid (bs * HV): what the solve needs that does not depend
    on V, for a root (node 0) and at most BT (<= 64) other nodes. With ``A`` the strictly lower
    ``beta_i exp(G_i - G_j) kn_i.kn_j`` over the non-root nodes' ancestor pairs and ``Qc`` the
    ``exp(G_i - G_j) qn_i.kn_j`` (self included): ``T = (I + A)^-1`` (repeated squaring, the
    dependent chain this pass is made of) and ``Qc`` itself (into ``qc_buf``: the second pass
    multiplies it into its u, which keeps ``Qc T`` off this chain). The root enters every
    node's right-hand side as ``- c_i u_root`` with ``c_i = beta_i exp(G_i - G_root)
    kn_i.kn_root``, so the second pass needs ``T c`` and ``exp(G_i - G_root) qn_i.kn_root``
    too, and the root's own ``qn_root.kn_root`` (``c_buf [bs * HV, 3, BT]``: rows 0 and 1, and
    row 2 element 0). Writes G (every node, for the commit as well). PAIRS: the pair products
    are formed here from q and k (no pair kernel; each key head's are formed once per value
    head), else read from ``kk_buf``/``qk_buf``. PDL: lets the apply pass launch at once."""
    if PDL:  # the apply pass may start its state products now (it waits for this grid's writes)
        tl.extra.cuda.gdc_launch_dependents()
    i_bh = tl.program_id(0)
    i_b = i_bh // HV
    i_hv = i_bh % HV
    i_h = i_hv // (HV // H)
    o_t = tl.arange(0, BT)
    rows = 1 + o_t
    m_r = rows < N
    eye = o_t[:, None] == o_t[None, :]
    tok0 = i_b * N
    anc_b = anc + i_b.to(tl.int64) * N * N
    # The pair products first, then the head's decays (the order its speed was measured with).
    if PAIRS:
        kk, qk, kk_r, qk_r, qk_00 = _prep_pairs(q + (tok0 * H + i_h) * K, k + (tok0 * H + i_h) * K, anc_b, rows, m_r,
                                                N, scale, H, K, BK, PREC, RAW16)
    else:
        pair0 = (i_b * H + i_h).to(tl.int64) * NP * NP
        kk_r = tl.load(kk_buf + pair0 + rows * NP, mask=m_r, other=0.0)
        qk_r = tl.load(qk_buf + pair0 + rows * NP, mask=m_r, other=0.0)
        qk_00 = tl.load(qk_buf + pair0)
    a_neg = -tl.exp(tl.load(A_log + i_hv).to(tl.float32))
    dtb = tl.load(dt_bias + i_hv).to(tl.float32)
    G_r = a_neg * softplus(tl.load(a + tok0 * s_ab + i_hv).to(tl.float32) + dtb)
    # Two column chunks of BT cover every ancestor (columns 0 .. BT).
    G_i = _chunk_decay(a, anc_b, a_neg, dtb, tok0, i_hv, 2, rows, m_r, o_t, N, s_ab, BT)
    beta_i = _chunk_beta(b, tok0, i_hv, rows, m_r, s_ab)
    if PAIRS:
        A, Qc = _pairs_to_AQ(kk, qk, m_r, o_t, G_i, beta_i)
    else:
        A, Qc = _diag_pairs(kk_buf, qk_buf, pair0, rows, m_r, o_t, G_i, beta_i, NP)
    # Everything but T first: only A and the [BT] vector c stay live through the chain.
    mat = i_bh.to(tl.int64) * BT * BT + o_t[:, None] * BT + o_t[None, :]
    c0 = c_buf + i_bh.to(tl.int64) * 3 * BT
    dec_r = tl.exp(tl.minimum(tl.where(m_r, G_i - G_r, 0.0), 0.0))
    c = beta_i * dec_r * kk_r
    tl.store(qc_buf + mat, Qc)
    tl.store(c0 + BT + o_t, dec_r * qk_r)
    tl.store(c0 + 2 * BT, qk_00)
    tl.store(g_buf + (tok0 + rows) * HV + i_hv, G_i, mask=m_r)
    tl.store(g_buf + tok0 * HV + i_hv, G_r)
    Tm = _unit_lower_inverse(A, eye, NSQ, PREC)
    tl.store(t_buf + mat, Tm)
    tl.store(c0 + o_t, tl.sum(Tm * c[None, :], 1))


@triton.jit
def _tree_twostage_apply_kernel(
    q, k, v, b, state, state_idx, g_buf, t_buf, qc_buf, c_buf, o, u_buf,
    N, scale, s_ab,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, BKC: tl.constexpr, PREC: tl.constexpr,
    RAW16: tl.constexpr, PDL: tl.constexpr, PARTS: tl.constexpr,
):
    """impl "twostage", second pass, grid (V tiles, bs * HV): the root from S0 alone, then all
    other nodes at once: ``u = T rhs - (T c) u_root`` and
    ``o = exp(G) qS + Qc u + exp(G - G_root) qk_root u_root`` with
    ``rhs = beta (v - exp(G) kS)`` — state products and two block products. PDL (launched as a
    programmatic dependent of the prep): the non-root nodes' state products first — they need
    nothing the prep writes, so they run while the prep's squaring chain does — then wait for the
    prep's G, T, Qc and c (the order that spills least, AOT-compiled)."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = head_tile(state_idx, H, HV, K, V, BK, BV)
    o_t = tl.arange(0, BT)
    rows = 1 + o_t
    m_r = rows < N
    tok0 = i_b * N
    i_bh = (i_b * HV + i_hv).to(tl.int64)
    c0 = c_buf + i_bh * 3 * BT
    p_q = q + (tok0 * H + i_h) * K
    p_k = k + (tok0 * H + i_h) * K
    if PDL:
        kS, qS = _chunk_state_products(p_k, p_q, state, slot, i_hv, rows, m_r, o_v, m_v, scale,
                                       H, HV, K, V, BT, BK, BV, BKC, PREC, RAW16, PARTS)
        tl.extra.cuda.gdc_wait()  # the prep's outputs are read from here on
    kS_r, qS_r = _root_state_products(p_k, p_q, state, slot, i_hv, o_v, m_v, scale, HV, K, V, BK, BV, BKC)
    G_r = tl.load(g_buf + tok0 * HV + i_hv)
    beta_r = 1.0 / (1.0 + tl.exp(-tl.load(b + tok0 * s_ab + i_hv).to(tl.float32)))
    v_r = tl.load(v + (tok0 * HV + i_hv) * V + o_v, mask=m_v, other=0.0).to(tl.float32)
    u_r = beta_r * (v_r - tl.exp(G_r) * kS_r)
    o_r = tl.exp(G_r) * qS_r + tl.load(c0 + 2 * BT) * u_r
    tl.store(o + (tok0 * HV + i_hv) * V + o_v, o_r.to(o.dtype.element_ty), mask=m_v)
    tl.store(u_buf + (tok0 * HV + i_hv) * V + o_v, u_r, mask=m_v)
    G_i = tl.load(g_buf + (tok0 + rows) * HV + i_hv, mask=m_r, other=0.0)
    mat = i_bh * BT * BT + o_t[:, None] * BT + o_t[None, :]
    off = ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :]
    m_o = m_r[:, None] & m_v[None, :]
    if not PDL:  # (after the root: the plain launch's order, which spills least)
        kS, qS = _chunk_state_products(p_k, p_q, state, slot, i_hv, rows, m_r, o_v, m_v, scale,
                                       H, HV, K, V, BT, BK, BV, BKC, PREC, RAW16, PARTS)
    beta_i, rhs, acc = _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, s_ab, HV, V)
    tc = tl.load(c0 + o_t)
    pc = tl.load(c0 + BT + o_t)
    u = dotf(tl.load(t_buf + mat), rhs, PREC) - tc[:, None] * u_r[None, :]
    acc += dotf(tl.load(qc_buf + mat), u, PREC) + pc[:, None] * u_r[None, :]
    tl.store(o + off, acc.to(o.dtype.element_ty), mask=m_o)
    tl.store(u_buf + off, u, mask=m_o)



def _check_pdl(dev) -> None:
    """``pdl=True`` where PDL cannot run is an error naming the switch, not a quiet plain launch."""
    why = pdl_unavailable(dev)
    if why is not None:
        raise ValueError(f"tree_gdn_verify: VerifyOptions(pdl=True) {why}")


def gate_rows(a: torch.Tensor, b: torch.Tensor):
    """``(a, b, s_ab)``: the gate inputs ``[T, HV]`` as given where both have unit column stride
    and one row stride ``s_ab`` (e.g. column views of sglang's ``[T, 2 * HV]`` b | a projection),
    else contiguous copies (``s_ab = HV``)."""
    if a.stride(-1) == 1 and b.stride(-1) == 1 and a.stride(0) == b.stride(0):
        return a, b, int(a.stride(0))
    a, b = a.contiguous(), b.contiguous()
    return a, b, int(a.shape[1])


def _out_buffer(buf, shape, dev, name):
    if buf is None:
        return torch.empty(shape, dtype=torch.float32, device=dev)
    if tuple(buf.shape) != tuple(shape) or buf.dtype != torch.float32 or not buf.is_contiguous():
        raise ValueError(f"tree_gdn_verify: {name} must be a contiguous float32 {tuple(shape)}, "
                         f"got {buf.dtype} {tuple(buf.shape)}")
    return buf


def _squarings(block: int, max_path) -> int:
    """Squarings in a chunk's ``(I + A)^-1 = (I - A)(I + A^2)...``: A^L = 0 when no path inside
    the chunk has more than L nodes (L <= the chunk size; ``max_path`` bounds it further)."""
    L = block if max_path is None else max(1, min(block, int(max_path)))
    return max(0, (L - 1).bit_length() - 1)


def tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, state_idx, *, scale=None, max_depth=None,
                    u_out=None, G_out=None, options: VerifyOptions = VerifyOptions()):
    """Tree GDN verify for ``bs`` trees of ``N`` nodes (shapes in the module docstring).

    Returns ``(o [T, HV, V] in v.dtype, u [bs, N, HV, V] fp32, G [bs, N, HV] fp32)``; ``state``
    is only read (:mod:`.commit` writes it). ``scale``: the query scale, default ``K ** -0.5``.
    ``max_depth``: no root-to-node path has more than ``max_depth`` nodes besides the root (the
    tree builder's depth limit), so each chunk's solve needs fewer squarings; a wrong bound gives
    wrong results. ``u_out`` / ``G_out``: contiguous fp32 buffers of u's and G's shapes to write
    into (a CUDA graph's shared buffers), else new tensors. ``options``: :class:`VerifyOptions`.

    Raises ValueError when ``T != bs * N``, ``HV`` is not a multiple of ``H``, ``u_out`` /
    ``G_out`` do not match, "twostage" is asked for a tree of more than 65 nodes, or ``pdl=True``
    where PDL cannot run.
    """
    T, H, K = k.shape
    HV, V = v.shape[1], v.shape[2]
    bs, N = anc.shape[0], anc.shape[1]
    if T != bs * N:
        raise ValueError(f"tree_gdn_verify: {T} tokens for {bs} trees of {N} nodes")
    if HV % H:
        raise ValueError(f"tree_gdn_verify: {HV} value heads not a multiple of {H} key heads")
    scale = K ** -0.5 if scale is None else scale
    opt = options
    # bf16x3: the products with raw q/k on bf16 tensor cores where q and k are bf16 (exact
    # operands); the fp32-by-fp32 products (the solve) at the solve precision.
    raw16 = int(opt.precision == "bf16x3" and q.dtype == torch.bfloat16 and k.dtype == torch.bfloat16)
    if raw16 and os.environ.get("TRITON_INTERPRET") == "1":
        raw16 = 2  # see dots.dot16
    prec = opt.solve_precision
    if prec is None:
        # (fp32 q/k under "bf16x3": every product tf32x3.)
        prec = "bf16x3" if raw16 else "ieee" if opt.precision == "ieee" else "tf32x3"
    state_parts = int(opt.state_parts if opt.state_parts is not None else 2 if opt.precision == "bf16x3" else 3)
    impl, block_t, block_v, qk_block, num_warps = opt.impl, opt.block_t, opt.block_v, opt.qk_block, opt.num_warps
    dev = v.device
    o = torch.empty_like(v)
    u = _out_buffer(u_out, (bs, N, HV, V), dev, "u_out")
    G = _out_buffer(G_out, (bs, N, HV), dev, "G_out")
    BK = max(16, triton.next_power_of_2(K))
    if impl == "auto":
        impl, auto_bv, auto_qk = pick_impl(bs, N, HV, V, dev, block_t, raw16=bool(raw16))
        block_v = block_v or auto_bv
        qk_block = qk_block or auto_qk
    BV = min(max(16, triton.next_power_of_2(V)), block_v or 64)
    NT = triton.cdiv(N, block_t)
    q, k, anc = q.contiguous(), k.contiguous(), anc.to(torch.uint8).contiguous()
    a, b, s_ab = gate_rows(a, b)
    pairs_in_prep = opt.pairs_in_prep
    if pairs_in_prep is None:
        pairs_in_prep = prep_forms_pairs(impl, N, NT)
    # (the "fused" walk forms them only on a tree of one node chunk)
    pairs_in_prep = bool(pairs_in_prep) and (impl == "twostage" or impl == "fused" and NT == 1)
    pdl = opt.pdl
    if pdl is None:
        pdl = apply_as_dependent(impl, bs * HV * triton.cdiv(V, BV), dev)
    pdl = bool(pdl) and impl == "twostage"
    if pdl:
        _check_pdl(dev)
    if pairs_in_prep:
        kk = qk = torch.empty(1, dtype=torch.float32, device=dev)  # (not read)
    else:
        # Node-pair products per key head (shared by its value heads and every V tile), in
        # blocks on and below the diagonal; "twostage" reads them in 64-node tiles, so they are
        # formed in 64-node tiles too (four times fewer programs).
        kk = torch.empty(bs, H, N, N, dtype=torch.float32, device=dev)
        qk = torch.empty_like(kk)
        qk_bt = qk_block or (64 if impl == "twostage" else block_t)
        nq = triton.cdiv(N, qk_bt)
        _tree_qk_kernel[(nq, nq, bs * H)](q, k, anc, kk, qk, N, N, float(scale), H=H, K=K, BT=qk_bt, BK=BK,
                                         PREC=prec, RAW16=raw16, num_warps=8 if qk_bt >= 64 else 4)
    path = None if max_depth is None else int(max_depth) + 1  # nodes on a path, root included
    if impl == "twostage":
        bt = block_chunk(N)
        if N - 1 > bt:
            raise ValueError(f"tree_gdn_verify: impl 'twostage' serves trees of at most {bt + 1} nodes, got {N}")
        t_buf = torch.empty(bs * HV, bt, bt, dtype=torch.float32, device=dev)
        qc_buf = torch.empty_like(t_buf)
        c_buf = torch.empty(bs * HV, 3, bt, dtype=torch.float32, device=dev)
        max_registers = opt.max_registers
        if max_registers is None:
            max_registers = register_limit(impl, N, bs, HV, V, BV, dev)
        limit = {"maxnreg": int(max_registers)} if max_registers else {}
        _tree_twostage_prep_kernel[(bs * HV,)](
            q, k, a, b, A_log.contiguous(), dt_bias.contiguous(), anc, kk, qk, G, t_buf,
            qc_buf, c_buf, N, N, float(scale), s_ab, H=H, HV=HV, K=K, BT=bt, BK=BK, NSQ=_squarings(bt, max_depth),
            PREC=prec, RAW16=raw16, PAIRS=pairs_in_prep, PDL=pdl, num_warps=opt.prep_warps or num_warps or 4,
            **limit,
        )
        _tree_twostage_apply_kernel[(triton.cdiv(V, BV), bs * HV)](
            q, k, v.contiguous(), b, state, state_idx.to(torch.int32).contiguous(), G, t_buf, qc_buf,
            c_buf, o, u, N, float(scale), s_ab, H=H, HV=HV, K=K, V=V, BT=bt, BK=BK, BV=BV, BKC=min(BK, 32),
            PREC=prec, RAW16=raw16, PDL=pdl, PARTS=state_parts, num_warps=num_warps or 4, launch_pdl=pdl,
            **limit,
        )
        return o, u, G
    common = dict(H=H, HV=HV, K=K, V=V, BT=block_t, BK=BK, BV=BV, PREC=prec, num_warps=num_warps or 4)
    if impl == "fused":
        _tree_gdn_fwd_kernel[(triton.cdiv(V, BV), bs * HV)](
            q, k, v.contiguous(), a, b,
            A_log.contiguous(), dt_bias.contiguous(), anc, state,
            state_idx.to(torch.int32).contiguous(), kk, qk, o, u, G, N, N, float(scale), s_ab,
            NT=NT, NSQ=_squarings(block_t, path), BKC=min(BK, 32), RAW16=raw16, PARTS=state_parts,
            PAIRS=pairs_in_prep, **common,
        )
    else:  # "split"
        ks = torch.empty_like(u)
        qs = torch.empty_like(u)
        sidx = state_idx.to(torch.int32).contiguous()
        _tree_state_products_kernel[(triton.cdiv(V, BV), bs * HV, NT)](
            q, k, a, A_log.contiguous(), dt_bias.contiguous(), anc, state, sidx, ks, qs, G,
            N, float(scale), s_ab, NT=NT, BKC=min(BK, 32), RAW16=raw16, PARTS=state_parts, **common,
        )
        _tree_gdn_solve_kernel[(triton.cdiv(V, BV), bs * HV)](
            b, v.contiguous(), sidx, ks, qs, kk, qk, o, u, G, N, N, s_ab,
            NT=NT, NSQ=_squarings(block_t, path), **common,
        )
    return o, u, G
