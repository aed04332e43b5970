"""Snapshot-free tree GatedDeltaNet kernels (Triton): verify, state commit, tree conv, conv commit.

The math is ``core/gdn_tree.py`` (tree WY form): per request and value head, one triangular
solve over the tree's nodes in topological order with the ancestor mask, decays taken along
the path. Nothing per node is kept except ``u`` (the solved values), the path decay ``G`` and
the normalised key, from which the commit rebuilds the accepted node's state from at most
L + 1 terms and writes it into the request's state slot in place.

Layouts follow sglang's Qwen3.5 GDN layer in TARGET_VERIFY (``bs`` requests, ``N`` verify
positions each, tokens request-major, ``T = bs * N``):

    q, k   [T, H, K]    raw (the kernel L2-normalises them, eps 1e-6 as sglang does)
    v      [T, HV, V]
    a, b   [T, HV]      raw gate inputs: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)
    anc    [bs, N, N]   bool/uint8 ancestor mask, self included (``VerifyLayout.ancestor_mask``)
    state  [slots, HV, V, K] fp32 recurrent state pool (sglang stores S transposed), read-only here
    state_idx [bs]      slot of each request

Outputs: ``o [T, HV, V]`` and the commit inputs ``u [bs, N, HV, V]`` fp32 and ``G [bs, N, HV]``
fp32; the commit also reads the raw keys ``k`` again (the caller keeps the layer's ``k``).

The conv kernels take the layer's pre-conv projections ``x [T, C]``, weights ``[C, W]``, the
conv state pool ``[slots, C, W-1]`` (oldest first; any strides: sglang's pool is channel-fastest)
and the tree's ``parent [bs, N]`` (-1 = root).

Every kernel has a plain-torch reference in ``core/gdn_tree.py``; ``test/core/test_gdn_tree_triton.py``
checks them against float64 path-by-path recurrences (on CPU through the Triton interpreter).
"""

from __future__ import annotations

import os
from typing import Optional

import torch
import triton
import triton.language as tl

L2_EPS = 1e-6
# ``tree_gdn_verify``'s precisions (Triton ``input_precision`` of the products, see there).
PRECISIONS = ("bf16x3", "tf32x3", "ieee")
# ``tree_gdn_verify``'s ``solve_precision`` (products of two fp32 tiles, :func:`_dotf`).
SOLVE_PRECISIONS = ("tf32x3", "bf16x3", "ieee")


@triton.jit
def _softplus(x):
    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))


@triton.jit
def _round_to(v, DT: tl.constexpr):
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
def _load_rows(p, rows, m_r, o_k, m_k, stride_t, scale, RAW16: tl.constexpr):
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
def _dot16(a, b, RAW16: tl.constexpr):
    """Product of 16-bit operands, fp32 out. RAW16 == 2 in the Triton interpreter, whose dot
    multiplies bf16 bit patterns as integers: there the (exact) fp32 values are multiplied."""
    if RAW16 == 2:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


# How a product of two bf16 tiles runs inside :func:`_dotf`: 2 in the Triton interpreter (whose
# dot multiplies bf16 bit patterns as integers, see :func:`_dot16`), else 1.
_D16 = tl.constexpr(2 if os.environ.get("TRITON_INTERPRET") == "1" else 1)


@triton.jit
def _dotf(a, b, PREC: tl.constexpr):
    """Product of two fp32 tiles at ``PREC``: Triton's ``input_precision`` ("tf32x3", "ieee"), or
    "bf16x3": each operand split in a bf16 high part and a bf16 remainder, three bf16
    tensor-core products (``lo.hi + hi.lo + hi.hi``, smallest first; the ``lo.lo`` term and the
    remainders' own rounding leave ~2^-16 relative error, against tf32x3's ~2^-21, at half its
    tensor-core time: bf16 runs at twice the tf32 rate on sm_90 and sm_120). Written out rather
    than Triton's own "bf16x3" so that the interpreter runs the same rounding."""
    if PREC == "bf16x3":
        ah, al = _split2(a)
        bh, bl = _split2(b)
        return (_dot16(al, bh, _D16) + _dot16(ah, bl, _D16)) + _dot16(ah, bh, _D16)
    else:
        return tl.dot(a, b, input_precision=PREC)


@triton.jit
def _split2(x):
    """fp32 ``x`` as two bf16 parts with ``x ~= x1 + x2`` to ~16 bits (the remainder ``x - x1`` is
    exact in fp32 before its rounding to bf16)."""
    x1 = x.to(tl.bfloat16)
    x2 = (x - x1.to(tl.float32)).to(tl.bfloat16)
    return x1, x2


@triton.jit
def _split3(x):
    """fp32 ``x`` as three bf16 parts with ``x ~= x1 + x2 + x3`` to ~24 bits (each remainder is
    exact in fp32): with 16-bit left operands, three bf16 tensor-core products then give an
    fp32-accurate product (each partial product is exact in the fp32 accumulator)."""
    x1, x2 = _split2(x)
    x3 = ((x - x1.to(tl.float32)) - x2.to(tl.float32)).to(tl.bfloat16)
    return x1, x2, x3


@triton.jit
def _head_tile(state_idx, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
               BK: tl.constexpr, BV: tl.constexpr, READ_ONLY: tl.constexpr = True):
    """Grid (V tiles, bs * HV): this program's request, value head, key head, tile offsets and slot.
    READ_ONLY (the verify kernels): a negative slot — sglang's PAD_SLOT_ID (-1), the padded rows
    of a CUDA-graph replay — reads slot 0 instead of memory before the pool (an illegal address
    at 64 requests on the H200, session 11); those rows' outputs are discarded."""
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
    k_i, rk_i = _load_rows(p_k, rows, m_r, o_k, m_k, H * K, 1.0, RAW16)
    q_i, rq_i = _load_rows(p_q, rows, m_r, o_k, m_k, H * K, scale, RAW16)
    k_j, rk_j = _load_rows(p_k, cols, m_c, o_k, m_k, H * K, 1.0, RAW16)
    anc_ij = tl.load(anc_b + rows[:, None] * N + cols[None, :], mask=m_r[:, None] & m_c[None, :], other=0) != 0
    if RAW16:
        kk = _dot16(k_i, tl.trans(k_j), RAW16)
        qk = _dot16(q_i, tl.trans(k_j), RAW16)
    else:
        kk = _dotf(k_i, tl.trans(k_j), PREC)
        qk = _dotf(q_i, tl.trans(k_j), PREC)
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
def _chunk_decay(a, anc_b, a_neg, dtb, tok0, i_hv, n_chunks, rows, m_r, o_t, N, HV: tl.constexpr, BT: tl.constexpr):
    """Path decay ``G[t]`` = sum of g over t's ancestors (self included) for the chunk's rows,
    reading chunks ``0 .. n_chunks - 1`` (ancestors precede, so any bound past the row's own
    chunk is exact)."""
    G_i = tl.zeros([BT], dtype=tl.float32)
    for j in range(n_chunks):
        cols = j * BT + o_t
        m_c = cols < N
        a_j = tl.load(a + (tok0 + cols) * HV + i_hv, mask=m_c, other=0.0).to(tl.float32)
        g_j = tl.where(m_c, a_neg * _softplus(a_j + dtb), 0.0)
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
        # Both loads, then both norms, then the state slice: the order the register allocation
        # of the timed kernels was measured with (AOT spills grow with other orders).
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
                s1, s2 = _split2(S0c)
                kS += _dot16(kr, s2, RAW16) + _dot16(kr, s1, RAW16)
                qS += _dot16(qr, s2, RAW16) + _dot16(qr, s1, RAW16)
            else:
                s1, s2, s3 = _split3(S0c)
                kS += _dot16(kr, s1, RAW16) + _dot16(kr, s2, RAW16) + _dot16(kr, s3, RAW16)
                qS += _dot16(qr, s1, RAW16) + _dot16(qr, s2, RAW16) + _dot16(qr, s3, RAW16)
        else:
            kS += _dotf(krf, S0c, PREC)
            qS += _dotf(qrf, S0c, PREC)
    return kS * (1.0 / tl.sqrt(kss + 1e-6))[:, None], qS * (scale / tl.sqrt(qss + 1e-6))[:, None]


@triton.jit
def _chunk_beta(b, tok0, i_hv, rows, m_r, HV: tl.constexpr):
    """``beta = sigmoid(b)`` of a chunk's rows ([BT], 0 on rows past the tree)."""
    b_i = tl.load(b + (tok0 + rows) * HV + i_hv, mask=m_r, other=0.0).to(tl.float32)
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
def _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, HV: tl.constexpr, V: tl.constexpr):
    """A chunk's ``beta``, right-hand side ``beta (v - exp(G) kS)`` and output start
    ``exp(G) qS`` ([BT], [BT, BV], [BT, BV]) from its state products."""
    beta_i = _chunk_beta(b, tok0, i_hv, rows, m_r, HV)
    eG_i = tl.exp(G_i)
    v_i = tl.load(v + ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :],
                  mask=m_r[:, None] & m_v[None, :], other=0.0).to(tl.float32)
    return beta_i, beta_i[:, None] * (v_i - eG_i[:, None] * kS), eG_i[:, None] * qS


@triton.jit
def _chunk_solve(rhs, acc, beta_i, G_i, kk_buf, qk_buf, o, u_buf, g_buf, tok0, pair0, i_v, i_hv, i, rows,
                 m_r, o_t, o_v, m_v, N, NP, HV: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                 NSQ: tl.constexpr, PREC: tl.constexpr):
    """Chunk ``i``'s forward substitution given its right-hand side and output start
    (:func:`_chunk_rhs`): the earlier chunks have final u; the diagonal block (I + A) u = rhs
    has A strictly lower triangular (parents precede children), so A^L = 0 for paths of at most
    L nodes and (I + A)^-1 = (I - A)(I + A^2)(I + A^4)... (NSQ squarings): the factors commute,
    so they are applied to rhs one by one. Stores o, u
    (and G from the first V tile)."""
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
        rhs -= _dotf(beta_i[:, None] * dec * kk, u_j, PREC)
        acc += _dotf(qk * dec, u_j, PREC)
    A_ii, Q_ii = _diag_pairs(kk_buf, qk_buf, pair0, rows, m_r, o_t, G_i, beta_i, NP)
    u_i = rhs - _dotf(A_ii, rhs, PREC)
    Ap = A_ii
    for _ in tl.static_range(NSQ):  # A^2, A^4, ... up to the path length
        Ap = _dotf(Ap, Ap, PREC)
        u_i = u_i + _dotf(Ap, u_i, PREC)
    acc += _dotf(Q_ii, u_i, PREC)
    tl.store(o + ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :], acc.to(o.dtype.element_ty),
             mask=m_r[:, None] & m_v[None, :])
    tl.store(u_buf + ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :], u_i, mask=m_r[:, None] & m_v[None, :])
    if i_v == 0:
        tl.store(g_buf + (tok0 + rows) * HV + i_hv, G_i, mask=m_r)


@triton.jit
def _tree_gdn_fwd_kernel(
    q, k, v, a, b, A_log, dt_bias, anc, state, state_idx, kk_buf, qk_buf,
    o, u_buf, g_buf,
    N, NP, scale,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr, NSQ: tl.constexpr,
    BKC: tl.constexpr, PREC: tl.constexpr, RAW16: tl.constexpr, PARTS: tl.constexpr,
):
    """impl "fused": grid (V tiles, bs * HV); each program walks its head's node chunks in
    order, forming each chunk's state products and solving it. The node-pair products come
    precomputed (``_tree_qk_kernel``), so the walk carries [BT, BV] accumulators only."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = _head_tile(state_idx, H, HV, K, V, BK, BV)
    o_t = tl.arange(0, BT)
    a_neg = -tl.exp(tl.load(A_log + i_hv).to(tl.float32))
    dtb = tl.load(dt_bias + i_hv).to(tl.float32)
    tok0 = i_b * N
    anc_b = anc + i_b.to(tl.int64) * N * N
    pair0 = (i_b * H + i_h).to(tl.int64) * NP * NP
    p_q = q + (tok0 * H + i_h) * K
    p_k = k + (tok0 * H + i_h) * K
    for i in range(NT):
        rows = i * BT + o_t
        m_r = rows < N
        G_i = _chunk_decay(a, anc_b, a_neg, dtb, tok0, i_hv, i + 1, rows, m_r, o_t, N, HV, BT)
        kS, qS = _chunk_state_products(p_k, p_q, state, slot, i_hv, rows, m_r, o_v, m_v, scale,
                                       H, HV, K, V, BT, BK, BV, BKC, PREC, RAW16, PARTS)
        beta_i, rhs, acc = _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, HV, V)
        _chunk_solve(rhs, acc, beta_i, G_i, kk_buf, qk_buf, o, u_buf, g_buf, tok0, pair0, i_v, i_hv, i, rows,
                     m_r, o_t, o_v, m_v, N, NP, HV, V, BT, NSQ, PREC)
        # Later chunks of this program read u (and G) back through global memory.
        tl.debug_barrier()


@triton.jit
def _tree_state_products_kernel(
    q, k, a, A_log, dt_bias, anc, state, state_idx, ks_buf, qs_buf, g_buf,
    N, scale,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr, BKC: tl.constexpr,
    PREC: tl.constexpr, RAW16: tl.constexpr, PARTS: tl.constexpr,
):
    """impl "split", first pass, grid (V tiles, bs * HV, chunks): every chunk's state products
    and path decays at once (nothing here depends on other chunks' results)."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = _head_tile(state_idx, H, HV, K, V, BK, BV)
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
        G_i = _chunk_decay(a, anc + i_b.to(tl.int64) * N * N, a_neg, dtb, tok0, i_hv, NT, rows, m_r, o_t, N, HV, BT)
        tl.store(g_buf + (tok0 + rows) * HV + i_hv, G_i, mask=m_r)


@triton.jit
def _tree_gdn_solve_kernel(
    b, v, state_idx, ks_buf, qs_buf, kk_buf, qk_buf, o, u_buf, g_buf,
    N, NP,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NT: tl.constexpr, NSQ: tl.constexpr, PREC: tl.constexpr,
):
    """impl "split", second pass, grid (V tiles, bs * HV): the sequential forward substitution
    over the chunks, reading the first pass's products: only [BT, BV] / [BT, BT] tiles."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = _head_tile(state_idx, H, HV, K, V, BK, BV)
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
        beta_i, rhs, acc = _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, HV, V)
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
            kk += _dot16(kr, tl.trans(kr), RAW16)
            qk += _dot16(qr, tl.trans(kr), RAW16)
        else:
            kk += _dotf(krf, tl.trans(krf), PREC)
            qk += _dotf(qrf, tl.trans(krf), PREC)
        qss += tl.sum(qrf * qrf, 1)
        k_0r = tl.load(p_k + o_kc, mask=m_kc, other=0.0)
        k_0 = k_0r.to(tl.float32)
        q_0 = tl.load(p_q + o_kc, mask=m_kc, other=0.0).to(tl.float32)
        # The root's column as a product too (its key in the first of 16 columns): an
        # elementwise row reduction here would need the rows in a second register layout.
        if RAW16:
            b0 = tl.where(tl.arange(0, 16)[None, :] == 0, k_0r[:, None], 0.0).to(k_0r.dtype)
            k0k += tl.sum(_dot16(kr, b0, RAW16), 1)
            k0q += tl.sum(_dot16(qr, b0, RAW16), 1)
        else:
            b0 = tl.where(tl.arange(0, 16)[None, :] == 0, k_0[:, None], 0.0)
            k0k += tl.sum(_dotf(krf, b0, PREC), 1)
            k0q += tl.sum(_dotf(qrf, b0, PREC), 1)
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
        Ap = _dotf(Ap, Ap, PREC)
        Tm = Tm + _dotf(Ap, Tm, PREC)
    return Tm


@triton.jit
def _tree_twostage_prep_kernel(
    q, k, a, b, A_log, dt_bias, anc, kk_buf, qk_buf, g_buf, t_buf, qc_buf, c_buf,
    N, NP, scale,
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
    # The pair products first, then the head's decays (the order timed in session 12's calls 3-4).
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
    G_r = a_neg * _softplus(tl.load(a + tok0 * HV + i_hv).to(tl.float32) + dtb)
    # Two column chunks of BT cover every ancestor (columns 0 .. BT).
    G_i = _chunk_decay(a, anc_b, a_neg, dtb, tok0, i_hv, 2, rows, m_r, o_t, N, HV, BT)
    beta_i = _chunk_beta(b, tok0, i_hv, rows, m_r, HV)
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
    N, scale,
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
    prep's G, T, Qc and c (this order spills least: AOT, RESULTS.md session 10)."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = _head_tile(state_idx, H, HV, K, V, BK, BV)
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
    beta_r = 1.0 / (1.0 + tl.exp(-tl.load(b + tok0 * HV + i_hv).to(tl.float32)))
    v_r = tl.load(v + (tok0 * HV + i_hv) * V + o_v, mask=m_v, other=0.0).to(tl.float32)
    u_r = beta_r * (v_r - tl.exp(G_r) * kS_r)
    o_r = tl.exp(G_r) * qS_r + tl.load(c0 + 2 * BT) * u_r
    tl.store(o + (tok0 * HV + i_hv) * V + o_v, o_r.to(o.dtype.element_ty), mask=m_v)
    tl.store(u_buf + (tok0 * HV + i_hv) * V + o_v, u_r, mask=m_v)
    G_i = tl.load(g_buf + (tok0 + rows) * HV + i_hv, mask=m_r, other=0.0)
    mat = i_bh * BT * BT + o_t[:, None] * BT + o_t[None, :]
    off = ((tok0 + rows[:, None]) * HV + i_hv) * V + o_v[None, :]
    m_o = m_r[:, None] & m_v[None, :]
    if not PDL:  # (the order the default was timed with)
        kS, qS = _chunk_state_products(p_k, p_q, state, slot, i_hv, rows, m_r, o_v, m_v, scale,
                                       H, HV, K, V, BT, BK, BV, BKC, PREC, RAW16, PARTS)
    beta_i, rhs, acc = _chunk_rhs(kS, qS, G_i, b, v, tok0, i_hv, rows, m_r, o_v, m_v, HV, V)
    tc = tl.load(c0 + o_t)
    pc = tl.load(c0 + BT + o_t)
    u = _dotf(tl.load(t_buf + mat), rhs, PREC) - tc[:, None] * u_r[None, :]
    acc += _dotf(tl.load(qc_buf + mat), u, PREC) + pc[:, None] * u_r[None, :]
    tl.store(o + off, acc.to(o.dtype.element_ty), mask=m_o)
    tl.store(u_buf + off, u, mask=m_o)


@triton.jit
def _commit_prologue(state, state_idx, g_buf, accepted, accept_len, N,
                     H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                     P: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """Commit kernels' shared start: this program's state tile, the path length and the decayed
    committed state ``exp(G_last) S0`` the path terms are added to."""
    i_v, i_b, i_hv, i_h, o_k, o_v, m_k, m_v, slot = _head_tile(state_idx, H, HV, K, V, BK, BV, READ_ONLY=False)
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
    as ``_tree_conv_kernel`` formed it (same tap order, products rounded the same way), then
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
                acc += tl.where(src_t >= 0, _round_to(xv * wc, PX), _round_to(sv * wc, PS))
            acc = acc / (1.0 + tl.exp(-acc))
            kr = _round_to(acc, x.dtype.element_ty)
            kn = kr / tl.sqrt(tl.sum(kr * kr, 0) + 1e-6)
            u = tl.load(u_buf + ((tok0 + node) * HV + i_hv) * V + o_v, mask=m_v, other=0.0)
            S += w_t * kn[:, None] * u[None, :]
    _commit_store(state, p_s, m_s, S, dst_idx, i_b, i_hv, o_k, o_v, HV, K, V, HAS_DST)


@triton.jit
def _tree_conv_kernel(
    x, w, bias, conv_state, state_idx, parent, out,
    T, N, C, s_slot, s_c, s_w,
    KW: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr, BN: tl.constexpr, BC: tl.constexpr,
    PX: tl.constexpr, PS: tl.constexpr, FLAT: tl.constexpr = False,
):
    """Grid (C tiles, node tiles, bs): BN nodes of one tree; FLAT: grid (C tiles, token tiles),
    BN tokens of the flattened ``[T = bs * N]`` batch, which may span trees (each row finds its
    tree and state slot), so a 17-node tree costs 17 rows instead of two 16-row tiles."""
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
        slot = tl.maximum(tl.load(state_idx + i_b).to(tl.int64), 0)  # PAD_SLOT_ID rows: see _head_tile
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
        xv = tl.load(x + (tok0 + tl.maximum(cur, 0))[:, None] * C + o_c[None, :],
                     mask=in_tree[:, None] & m_c[None, :], other=0.0).to(tl.float32)
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
        acc += tl.where(in_tree[:, None], _round_to(xv * wc[None, :], PX), _round_to(sv * wc[None, :], PS))
        par = tl.load(parent + tok0 + tl.maximum(cur, 0), mask=in_tree, other=-1)
        up = tl.where(in_tree, tl.where(par < 0, 1, 0), up + 1)
        cur = tl.where(in_tree, par, -1)
    if SILU:
        acc = acc / (1.0 + tl.exp(-acc))
    tl.store(out + (tok0 + o_n)[:, None] * C + o_c[None, :],
             _round_to(acc, out.dtype.element_ty).to(out.dtype.element_ty), mask=m_n[:, None] & m_c[None, :])


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


# ----------------------------------------------------------------------------- wrappers


# Shared memory the 64-node pair-product tile asks for, with margin (bytes; sm_90 / sm_120 AOT
# here: 131072 / 131072 with fp32 operands, 53248 / 49152 with raw bf16 ones).
QK64_SMEM = 160 * 1024
QK64_SMEM_RAW16 = 64 * 1024


def pick_impl(bs: int, n_nodes: int, num_v_heads: int, v_dim: int, device, block_t: int = 16,
              raw16: bool = True):
    """``(impl, block_v, qk_block)`` for ``impl="auto"``, from the H200 timings at Qwen3.6-27B
    shapes (RESULTS.md session 9, 48 layers, GDN verify alone, depth bound 15, bf16x3):

    - one 16-node chunk (chains): "fused" (bs 1 / 4 / 16: 0.50 / 0.73 / 2.77 ms vs twostage
      0.67 / 1.00 / 2.87);
    - trees of at most 65 nodes: "twostage" (bs 16, 65 nodes: 11.1 vs fused 18.2 ms; bs 1:
      1.7 vs 2.2), with 32-wide value tiles for trees past 33 nodes (65 nodes, bs 1 / 4: 1.69 /
      3.37 vs 1.93 / 3.68; from 4 programs of ``bs * HV * V / 64`` per SM with the register
      limit of :func:`register_limit`, session 12: bs 16 / 64 7.79 / 29.34 vs 64-wide 8.39 /
      31.06; at 33 nodes 64 wins: bs 1 1.14 vs 1.21), and for trees of at most 17
      nodes while under one program per SM (bs 1, 17 nodes: 0.69 vs 0.78 ms in session 10,
      0.75 vs 0.81 in session 9; bs 4: 64 wins, 1.02 vs 1.17), and 64-node pair-product tiles
      from 528 tree tokens up where the shared memory allows (with ``raw16``, bf16 q/k, the
      tile needs 53 KiB: every GPU here; fp32 operands 128 KiB: not the user's sm_120);
    - larger trees: "split" while the fused grid underfills the SMs, else "fused" (session 4).

    On CPU (the interpreter) always "fused"."""
    dev = torch.device(device)
    n_chunks = triton.cdiv(n_nodes, block_t)
    if dev.type != "cuda" or n_chunks <= 1:
        return "fused", 64, None
    props = torch.cuda.get_device_properties(dev)
    programs = bs * num_v_heads * triton.cdiv(v_dim, 64)
    if n_nodes - 1 <= block_chunk(n_nodes):
        smem = QK64_SMEM_RAW16 if raw16 else QK64_SMEM
        big_tile = getattr(props, "shared_memory_per_block_optin", 0) >= smem and bs * n_nodes >= 528
        sms = props.multi_processor_count
        # Past 33 nodes 32-wide tiles everywhere: under 4 programs per SM as timed in session 9,
        # from there with the register limit of :func:`register_limit` (session 12).
        narrow = n_nodes > 33 or (n_nodes <= 17 and programs < sms)
        return "twostage", 32 if narrow else 64, 64 if big_tile else 16
    return ("split" if programs < props.multi_processor_count else "fused"), 64, None


def prep_forms_pairs(impl: str, n_nodes: int) -> bool:
    """``pairs_in_prep`` for ``pairs_in_prep=None``: "twostage" trees past 33 nodes (64-node
    chunks) form their pair products in the prep kernel. H200, Qwen3.6-27B shapes, 48 layers,
    65 nodes (RESULTS.md session 10): bs 1 / 4 / 16: 1.63 / 2.98 / 9.89 ms vs 1.69 / 3.16 /
    10.72 with the pair kernel; at 17 and 33 nodes the prep's own pair products cost more than
    the kernel they replace (bs 16, 33 nodes: prep 2.90 vs 1.10 + 0.41 ms)."""
    return impl == "twostage" and n_nodes > 33


def apply_as_dependent(impl: str, apply_programs: int, device) -> bool:
    """``pdl`` for ``pdl=None``: "twostage" launches its apply pass as a programmatic dependent of
    the prep where the apply grid is at most three programs per SM (the prep then leaves SMs idle
    that the apply's state products can use), on GPUs that have PDL. H200, Qwen3.6-27B shapes,
    48 layers (RESULTS.md session 11): bs 1, 17 / 33 / 65 nodes (96-192 programs): 0.59 / 0.79 /
    1.44 ms vs 0.68 / 0.87 / 1.58 without; bs 4, 17 / 33 nodes (384): 0.82 / 1.49 vs 0.88 / 1.51;
    from 768 programs (bs 4 at 65 nodes; bs 16) it costs: 3.33 vs 2.97; 11.21 vs 11.09 ms."""
    dev = torch.device(device)
    if impl != "twostage" or _pdl_unavailable(dev) is not None:
        return False
    return apply_programs <= 3 * torch.cuda.get_device_properties(dev).multi_processor_count


def register_limit(impl: str, n_nodes: int, bs: int, num_v_heads: int, v_dim: int, block_v: int, device) -> int:
    """``max_registers`` for ``max_registers=None`` (0: the compiler's own, 255 at 4 warps): 168
    for "twostage" past 33 nodes with 32-wide value tiles where ``bs * HV * V / 64`` is at least
    4 programs per SM — three programs per SM instead of two, more spills. H200, Qwen3.6-27B
    shapes, 48 layers, 65 nodes (RESULTS.md session 12, call 3): bs 16 / 64 7.79 / 29.34 ms vs
    8.39 / 31.06 with 64-wide tiles and no limit (the default before); 64-wide tiles at 168:
    9.65 / 36.30; bs 4 (under the bound) 2.38 vs 2.41; bs 1 1.25 vs 1.08."""
    dev = torch.device(device)
    if impl != "twostage" or n_nodes <= 33 or block_v != 32 or dev.type != "cuda" \
            or os.environ.get("TRITON_INTERPRET") == "1":
        return 0
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    return 168 if bs * num_v_heads * triton.cdiv(v_dim, 64) >= 4 * sms else 0


def _pdl_unavailable(dev) -> Optional[str]:
    """Why programmatic dependent launch cannot run on ``dev`` (None: it can): it needs a CUDA
    device of compute capability 9.0+ (the H200's sm_90, the RTX PRO 6000's sm_120), not the CPU
    interpreter."""
    if os.environ.get("TRITON_INTERPRET") == "1" or dev.type != "cuda":
        return "needs a CUDA GPU, not the interpreter"
    major, minor = torch.cuda.get_device_capability(dev)
    if major < 9:
        return f"needs compute capability 9.0+, this GPU is {major}.{minor}"
    return None


def _check_pdl(dev) -> None:
    """``pdl=True`` where PDL cannot run is an error naming the switch, not a quiet plain launch."""
    why = _pdl_unavailable(dev)
    if why is not None:
        raise ValueError(f"tree_gdn_verify: pdl=True (SGLANG_DDTREE_WY_PDL=1) {why}")


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


def block_chunk(n_nodes: int) -> int:
    """impl "twostage": the tile for the non-root nodes (a power of two, 16 .. 64)."""
    return min(64, max(16, triton.next_power_of_2(max(1, n_nodes - 1))))


def tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, state_idx, scale=None,
                    block_t: int = 16, block_v=None, precision: str = "bf16x3", impl: str = "auto",
                    num_warps=None, u_out=None, G_out=None, max_depth=None, qk_block=None, prep_warps=None,
                    pairs_in_prep=None, pdl=None, solve_precision=None, state_parts=None, max_registers=None):
    """Tree GDN verify for ``bs`` trees of ``N`` nodes. Shapes in the module docstring.

    Returns ``(o [T, HV, V] in v.dtype, u [bs, N, HV, V] fp32, G [bs, N, HV] fp32)``.
    ``state`` is not modified (see :func:`tree_gdn_commit`). ``precision`` is Triton's
    ``input_precision`` for every product: "bf16x3" (default): with bf16 q and k, the
    products that have raw q/k on one side run on bf16 tensor cores (pair products in one
    pass, state products over the state split in ``state_parts`` bf16 parts; the norms scale
    the results; H200: 1.2-1.6x faster than "tf32x3", RESULTS.md session 9) and the solve's
    fp32 products at ``solve_precision``; with other q/k dtypes the same as "tf32x3": three
    tf32 tensor-core passes, measured as accurate as "ieee" (fp32 FMA) on the H200.
    ``impl``: "fused" (one program per head and V tile walks the node chunks, forming each
    chunk's state products on the way), "split" (all chunks' state products and decays in one
    fully parallel pass, then the walk does only the substitution), "twostage" (trees of at
    most 65 nodes: the root alone, the V-independent ``(I + A)^-1`` of the other nodes per
    request and head first, then every node at once) or "auto" (:func:`pick_impl`). Two more
    were measured and removed in session 8: "inverse" (``(I + A)^-1`` by 16-node block columns,
    slower everywhere) and "block" (root alone, then 64-node chunks in one kernel: spills, and
    at bs 16 slower than twostage; RESULTS.md sessions 7-8).
    ``block_v`` (default 64, or the auto choice) and ``block_t`` 16: the fastest tiles measured
    on the H200 (RESULTS.md). ``num_warps`` of the verify kernels: default 4 (the H200 timed
    "twostage" at bs 16, 65 nodes: 17.2 ms with 4 warps vs 30.4 with 8, RESULTS.md session 8).
    ``u_out``/``G_out``: contiguous buffers of u's and G's shapes to write them into (a CUDA
    graph's shared buffers), else new tensors. ``max_depth``: if given, no root-to-node path
    has more than ``max_depth`` nodes besides the root (the tree builder's depth limit); fewer
    squarings in each chunk's solve. A wrong bound gives wrong results. ``qk_block``: the tile
    of the node-pair products (default 64 for "twostage", else ``block_t``). ``prep_warps``:
    num_warps of the "twostage" prep kernel alone (default ``num_warps``). ``pairs_in_prep``
    ("twostage" only): the prep kernel forms the node-pair products itself instead of a
    separate pair-product kernel (one launch and the pair buffers less; each key head's
    products formed once per value head); None (default): :func:`prep_forms_pairs`.
    ``pdl`` ("twostage" only, compute capability 9.0+): the apply pass is launched as a
    programmatic dependent of the prep (CUDA PDL) and forms its state products while the prep
    runs, waiting only for what the prep writes; None (default): :func:`apply_as_dependent`.
    ``solve_precision``: the precision of the products of two fp32 tiles (the solve and
    ``(I + A)^-1``; with fp32 q/k their products too): "bf16x3" (each operand split in two bf16
    parts, three bf16 products: ~2^-16 relative per product against tf32x3's ~2^-21, at half
    its tensor-core time, :func:`_dotf`), "tf32x3" or "ieee"; None: "bf16x3" under
    ``precision="bf16x3"`` with bf16 q/k, "ieee" under "ieee", else "tf32x3". ``state_parts`` (bf16 q/k under
    "bf16x3" only): the state products with the state split in 3 bf16 parts (fp32-accurate) or
    2 (~2^-16, a third fewer products); None: 2 under "bf16x3". Both defaults from the H200 at
    Qwen3.6-27B shapes (RESULTS.md session 12, 65 nodes, bs 1 / 4 / 16 / 64: 1.04 / 2.41 / 8.26 /
    30.15 ms vs 1.41 / 3.24 / 10.07 / 36.14 with tf32x3 and three parts); committed states
    within ~4e-6 of the float64 path reference there vs ~1.4e-7 (bf16 outputs: unchanged).
    ``solve_precision="tf32x3", state_parts=3`` is the fp32-accurate choice. ``max_registers`` ("twostage" only, GPU): the
    register limit per thread of its two kernels (Triton's ``maxnreg``; 0: the compiler's, 255
    at 4 warps, two programs per SM) — fewer registers, more programs per SM, more spills;
    None (default): :func:`register_limit`.
    Two more options were timed and removed: ``split_qk`` (the apply pass forming the key
    products before the query products; session 10: at most 1% at 65 nodes, slower at 33) and
    ``prep_halves`` (the prep's 64-node ``(I + A)^-1`` from its two 32-node halves; session 11:
    slower at bs 1 / 4 / 16, 65 nodes: 1.79 / 3.27 / 12.57 ms vs 1.58 / 2.97 / 11.09).
    """
    T, H, K = k.shape
    HV, V = v.shape[1], v.shape[2]
    bs, N = anc.shape[0], anc.shape[1]
    if T != bs * N:
        raise ValueError(f"tree_gdn_verify: {T} tokens for {bs} trees of {N} nodes")
    if HV % H:
        raise ValueError(f"tree_gdn_verify: {HV} value heads not a multiple of {H} key heads")
    scale = K ** -0.5 if scale is None else scale
    if precision not in PRECISIONS:
        raise ValueError(f"tree_gdn_verify: precision must be one of {PRECISIONS}, got {precision!r}")
    # bf16x3: the products with raw q/k on bf16 tensor cores where q and k are bf16 (exact
    # operands); the fp32-by-fp32 products (the solve) at ``solve_precision``.
    raw16 = int(precision == "bf16x3" and q.dtype == torch.bfloat16 and k.dtype == torch.bfloat16)
    if raw16 and os.environ.get("TRITON_INTERPRET") == "1":
        raw16 = 2  # see _dot16
    if solve_precision is None:
        # (fp32 q/k under "bf16x3": every product tf32x3, as documented for that case.)
        solve_precision = "bf16x3" if raw16 else "ieee" if precision == "ieee" else "tf32x3"
    if solve_precision not in SOLVE_PRECISIONS:
        raise ValueError(f"tree_gdn_verify: solve_precision must be one of {SOLVE_PRECISIONS}, got {solve_precision!r}")
    if state_parts is None:
        state_parts = 2 if precision == "bf16x3" else 3
    state_parts = int(state_parts)
    if max_registers is not None and not 0 <= int(max_registers) <= 255:
        raise ValueError(f"tree_gdn_verify: max_registers must be 0 (the compiler's) .. 255, got {max_registers}")
    if state_parts not in (2, 3):
        raise ValueError(f"tree_gdn_verify: state_parts must be 2 or 3, got {state_parts}")
    precision = solve_precision
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
    if pairs_in_prep is None:
        pairs_in_prep = prep_forms_pairs(impl, N)
    pairs_in_prep = bool(pairs_in_prep) and impl == "twostage"
    if pdl is None:
        pdl = apply_as_dependent(impl, bs * HV * triton.cdiv(V, BV), dev)
    pdl = bool(pdl) and impl == "twostage"
    if pdl:
        _check_pdl(dev)
    if pairs_in_prep:
        kk = qk = torch.empty(1, dtype=torch.float32, device=dev)  # (not read)
    else:
        # Node-pair products per key head (shared by its value heads and every V tile), in
        # blocks on and below the diagonal; the chunked-by-64 impls read them in 64-node tiles,
        # so they are formed in 64-node tiles too (four times fewer programs).
        kk = torch.empty(bs, H, N, N, dtype=torch.float32, device=dev)
        qk = torch.empty_like(kk)
        qk_bt = qk_block or (64 if impl == "twostage" else block_t)
        nq = triton.cdiv(N, qk_bt)
        _tree_qk_kernel[(nq, nq, bs * H)](q, k, anc, kk, qk, N, N, float(scale), H=H, K=K, BT=qk_bt, BK=BK,
                                         PREC=precision, RAW16=raw16, num_warps=8 if qk_bt >= 64 else 4)
    path = None if max_depth is None else int(max_depth) + 1  # nodes on a path, root included
    if impl == "twostage":
        bt = block_chunk(N)
        if N - 1 > bt:
            raise ValueError(f"tree_gdn_verify: impl 'twostage' serves trees of at most {bt + 1} nodes, got {N}")
        t_buf = torch.empty(bs * HV, bt, bt, dtype=torch.float32, device=dev)
        qc_buf = torch.empty_like(t_buf)
        c_buf = torch.empty(bs * HV, 3, bt, dtype=torch.float32, device=dev)
        if max_registers is None:
            max_registers = register_limit(impl, N, bs, HV, V, BV, dev)
        limit = {"maxnreg": int(max_registers)} if max_registers else {}
        _tree_twostage_prep_kernel[(bs * HV,)](
            q, k, a.contiguous(), b.contiguous(), A_log.contiguous(), dt_bias.contiguous(), anc, kk, qk, G, t_buf,
            qc_buf, c_buf, N, N, float(scale), H=H, HV=HV, K=K, BT=bt, BK=BK, NSQ=_squarings(bt, max_depth),
            PREC=precision, RAW16=raw16, PAIRS=pairs_in_prep, PDL=pdl, num_warps=prep_warps or num_warps or 4,
            **limit,
        )
        _tree_twostage_apply_kernel[(triton.cdiv(V, BV), bs * HV)](
            q, k, v.contiguous(), b.contiguous(), state, state_idx.to(torch.int32).contiguous(), G, t_buf, qc_buf,
            c_buf, o, u, N, float(scale), H=H, HV=HV, K=K, V=V, BT=bt, BK=BK, BV=BV, BKC=min(BK, 32),
            PREC=precision, RAW16=raw16, PDL=pdl, PARTS=state_parts, num_warps=num_warps or 4, launch_pdl=pdl,
            **limit,
        )
        return o, u, G
    common = dict(H=H, HV=HV, K=K, V=V, BT=block_t, BK=BK, BV=BV, PREC=precision, num_warps=num_warps or 4)
    if impl == "fused":
        _tree_gdn_fwd_kernel[(triton.cdiv(V, BV), bs * HV)](
            q, k, v.contiguous(), a.contiguous(), b.contiguous(),
            A_log.contiguous(), dt_bias.contiguous(), anc, state,
            state_idx.to(torch.int32).contiguous(), kk, qk, o, u, G, N, N, float(scale),
            NT=NT, NSQ=_squarings(block_t, path), BKC=min(BK, 32), RAW16=raw16, PARTS=state_parts, **common,
        )
    elif impl == "split":
        ks = torch.empty_like(u)
        qs = torch.empty_like(u)
        sidx = state_idx.to(torch.int32).contiguous()
        _tree_state_products_kernel[(triton.cdiv(V, BV), bs * HV, NT)](
            q, k, a.contiguous(), A_log.contiguous(), dt_bias.contiguous(), anc, state, sidx, ks, qs, G,
            N, float(scale), NT=NT, BKC=min(BK, 32), RAW16=raw16, PARTS=state_parts, **common,
        )
        _tree_gdn_solve_kernel[(triton.cdiv(V, BV), bs * HV)](
            b.contiguous(), v.contiguous(), sidx, ks, qs, kk, qk, o, u, G, N, N,
            NT=NT, NSQ=_squarings(block_t, path), **common,
        )
    else:
        raise ValueError(f"tree_gdn_verify: impl must be 'auto', 'fused', 'split' or 'twostage', got {impl!r}")
    return o, u, G


def tree_gdn_commit(state, state_idx, u, G, k, accepted, accept_len, block_v: int = 32, dst_idx=None) -> None:
    """Write each request's accepted-node state into ``state[state_idx[b]]`` in place.

    ``k [T, H, K]`` the raw keys given to :func:`tree_gdn_verify`; ``accepted [bs, P]`` verify
    positions of the accepted path (root first, -1 padded); ``accept_len [bs]`` accepted drafts
    (the path has ``accept_len + 1`` nodes). ``dst_idx [bs]``: write into slot ``dst_idx[b]``
    instead (-1: skip the request); its own slot is only read.
    """
    tree_gdn_commit_layers(state.unsqueeze(0), state_idx, u.unsqueeze(0), G.unsqueeze(0), k.contiguous().unsqueeze(0),
                           accepted, accept_len, block_v=block_v, dst_idx=dst_idx)


def _layer_stride(t, inner_shape) -> int:
    """Elements from one layer to the next of ``t [L, *inner_shape]`` whose layers are each
    contiguous (a slice of a larger buffer may have any layer stride)."""
    if tuple(t.shape[1:]) != tuple(inner_shape) or not t[0].is_contiguous():
        raise ValueError(f"expected layers of contiguous {tuple(inner_shape)}, got {tuple(t.shape)} "
                         f"strides {tuple(t.stride())}")
    return int(t.stride(0)) if t.shape[0] > 1 else 0


def tree_gdn_commit_layers(state, state_idx, u, G, k, accepted, accept_len, block_v: int = 32, dst_idx=None) -> None:
    """:func:`tree_gdn_commit` for ``L`` layers in one launch: ``state [L, slots, HV, V, K]``,
    ``u [L, bs, N, HV, V]``, ``G [L, bs, N, HV]``, ``k [L, T, H, K]`` (each layer contiguous,
    any layer stride: the engine passes its pool and a slice of its per-layer buffers)."""
    L, bs, N, HV, V = u.shape
    H, K = k.shape[2], k.shape[3]
    P = accepted.shape[1]
    BK = max(16, triton.next_power_of_2(K))
    BV = min(max(16, triton.next_power_of_2(V)), block_v)
    l_state = _layer_stride(state, state.shape[1:])
    _tree_gdn_commit_kernel[(triton.cdiv(V, BV), bs * HV, L)](
        state, state_idx.to(torch.int32).contiguous(), u, G, k,
        accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(), _dst(dst_idx, state_idx), N,
        l_state, _layer_stride(u, (bs, N, HV, V)), _layer_stride(G, (bs, N, HV)), _layer_stride(k, k.shape[1:]),
        H=H, HV=HV, K=K, V=V, P=P, BK=BK, BV=BV, HAS_DST=dst_idx is not None, num_warps=4,
    )


def conv_weight_tables(weights, biases, dtype, device):
    """``(w_tab, b_tab)``: int64 device tensors of the addresses of each layer's conv weight
    ``[C, W]`` and bias (``b_tab`` None without biases), for :func:`tree_gdn_commit_from_x_layers`.
    The kernels read the model's own parameters through them (no copies to go stale)."""
    C, KW = weights[0].shape
    if any(w.shape != (C, KW) or not w.is_contiguous() or w.dtype != dtype for w in weights):
        raise ValueError(f"conv_weight_tables: contiguous [{C}, {KW}] {dtype} conv weights expected")
    has_bias = biases[0] is not None
    if any((b is not None) != has_bias or (b is not None and (b.dtype != dtype or not b.is_contiguous()))
           for b in biases):
        raise ValueError(f"conv_weight_tables: every layer or no layer has a contiguous {dtype} bias")
    w_tab = torch.tensor([w.data_ptr() for w in weights], dtype=torch.int64, device=device)
    b_tab = torch.tensor([b.data_ptr() for b in biases], dtype=torch.int64, device=device) if has_bias else None
    return w_tab, b_tab


def tree_gdn_commit_from_x_layers(state, state_idx, u, G, x, w_tab, b_tab, conv_width: int, conv_state,
                                  k_offset: int, num_k_heads: int, accepted, accept_len, block_v: int = 32,
                                  dst_idx=None) -> None:
    """:func:`tree_gdn_commit_layers` that recomputes the path's keys from the pre-conv inputs
    ``x [L, T, C]`` (key channels from ``k_offset``, ``num_k_heads`` heads of the state's key
    dim), each layer's conv weight ``[C, conv_width]`` and bias (:func:`conv_weight_tables`) and
    the requests' conv state ``conv_state [L, slots, C, W-1]``, so the verify need not keep the
    keys (SiLU conv, as sglang's GDN layers). Call it *before* :func:`tree_conv_commit_layers`
    rewrites the conv state. ``dst_idx [bs]``: write into slot ``dst_idx[b]`` instead (-1: skip);
    the request's own slot is only read."""
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
        _dst(dst_idx, state_idx), N, C, int(k_offset), *conv_state.stride()[1:],
        _layer_stride(state, state.shape[1:]), _layer_stride(u, (bs, N, HV, V)), _layer_stride(G, (bs, N, HV)),
        _layer_stride(x, (T, C)), int(conv_state.stride(0)) if L > 1 else 0,
        H=int(num_k_heads), HV=HV, K=K, V=V, KW=int(conv_width), P=P, BK=BK, BV=BV, HAS_BIAS=b_tab is not None,
        # The tables hold weights of x's dtype (conv_weight_tables checks; the kernel reads them so).
        **_conv_product_dtypes(x.dtype, x.dtype, conv_state.dtype),
        HAS_DST=dst_idx is not None, num_warps=4,
    )


_TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


def _conv_product_dtypes(x_dtype, weight_dtype, state_dtype) -> dict:
    """The dtypes sglang's conv products round to: input x weight, state x weight."""
    return dict(PX=_TL_DTYPES[torch.promote_types(x_dtype, weight_dtype)],
                PS=_TL_DTYPES[torch.promote_types(state_dtype, weight_dtype)])


def _dst(dst_idx, state_idx):
    """The destination-slot argument of the commit kernels (``state_idx`` as a placeholder when
    there is none: the kernel does not read it then)."""
    return (dst_idx if dst_idx is not None else state_idx).to(torch.int32).contiguous()


def tree_conv(x, weight, bias, conv_state, state_idx, parent, activation: bool = True,
              block_n: int = 16, block_c: int = 64, flat=None):
    """Depthwise causal conv over each node's ancestor window. ``x [bs*N, C]`` -> ``[bs*N, C]``.
    ``flat``: node tiles over the flattened batch (no per-tree padding tile: a tree of 17 nodes
    costs 17 rows, not 32; ~20 more registers per thread, AOT); None (default): for more than
    one tree. H200, Qwen3.6-27B shapes, 48 layers (RESULTS.md session 11): bs 4 / 16 at 17
    nodes 0.35 / 0.74 ms vs 0.41 / 1.14, at 65 nodes 0.82 / 2.41 vs 0.86 / 2.67; one tree
    pads nothing it would not also pad flat, and the registers cost (65 nodes: 0.36 vs 0.32)."""
    bs, N = parent.shape
    if flat is None:
        flat = bs > 1
    C, KW = weight.shape
    out = torch.empty_like(x)
    if flat:
        grid = (triton.cdiv(C, block_c), triton.cdiv(bs * N, block_n))
    else:
        grid = (triton.cdiv(C, block_c), triton.cdiv(N, block_n), bs)
    _tree_conv_kernel[grid](
        x.contiguous(), weight.contiguous(), bias if bias is not None else weight, conv_state,
        state_idx.to(torch.int32).contiguous(), parent.to(torch.int32).contiguous(), out, bs * N, N, C,
        *conv_state.stride(), KW=KW, HAS_BIAS=bias is not None, SILU=activation, BN=block_n, BC=block_c,
        FLAT=bool(flat), **_conv_product_dtypes(x.dtype, weight.dtype, conv_state.dtype),
    )
    return out


def tree_conv_commit(x, conv_state, state_idx, accepted, accept_len, block_c: int = 64, dst_idx=None) -> None:
    """New conv state (last W-1 inputs along the accepted path) written in place, or into slot
    ``dst_idx[b]`` (-1: skip) with the request's own slot only read."""
    tree_conv_commit_layers(x.contiguous().unsqueeze(0), conv_state.unsqueeze(0), state_idx, accepted, accept_len,
                            block_c=block_c, dst_idx=dst_idx)


def tree_conv_commit_layers(x, conv_state, state_idx, accepted, accept_len, block_c: int = 64, dst_idx=None) -> None:
    """:func:`tree_conv_commit` for ``L`` layers in one launch: ``x [L, T, C]`` (each layer
    contiguous), ``conv_state [L, slots, C, W-1]`` (any strides, the same for every layer)."""
    L, T, C = x.shape
    bs = accepted.shape[0]
    W1 = conv_state.shape[3]
    _tree_conv_commit_kernel[(triton.cdiv(C, block_c), bs, L)](
        x, conv_state, state_idx.to(torch.int32).contiguous(),
        accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(), _dst(dst_idx, state_idx),
        T // bs, C, *conv_state.stride()[1:], _layer_stride(x, (T, C)), int(conv_state.stride(0)) if L > 1 else 0,
        KW=W1 + 1, P=accepted.shape[1], BC=block_c, BW=max(2, triton.next_power_of_2(W1)),
        HAS_DST=dst_idx is not None,
    )
