"""Tree-verify attention in Triton, the committed KV split across programs.

    q        [T, Hq, D]       the window's queries, request b's rows ``qo_indptr[b] .. qo_indptr[b+1]``
    k_tree   [T, Hkv, D]      the window's own keys / values (``v_tree`` likewise), rows as ``q``
    k_buffer [slots, Hkv, D]  the KV pool of the layer (``v_buffer`` likewise)
    kv_indptr [bs+1], kv_indices: the committed slots of each request (int32 or int64)
    custom_mask (bool / uint8, flat), mask_indptr [bs+1]: sglang's FULL layout (rows of P + n
        columns; only the window's columns ``P .. P + n`` are read); or None: the window is causal
        (``causal=True``) or fully visible (``causal=False``)
    sliding_window W (> 0, or -1 for none): sglang's rule, with ``P`` the listed context length
        of the request: context key ``c`` visible to window row ``i`` only if ``P + i <= c + W``,
        window key ``j`` only if ``i <= j + W``
    ->  o    [T, Hq, D]       written in place, q's dtype

The semantics of :func:`.naive.tree_attention_reference`, with one more rule shared with sglang's
``extend_attention_fwd`` in causal mode: a query row block never reads window keys past its own
last row (with a custom mask the window is topologically ordered: a node's ancestors come before
it), so a custom mask is served only with ``causal=True``.

A window of a few dozen queries against a long committed context leaves one program per
(request, head) waiting on its serial loop over the context. Here the context of each request is
cut into at most ``plan.splits`` ranges of at least ``plan.min_blocks`` key blocks, one program
each, and one more program attends to the window's own keys (grid ``[bs * q_blocks, Hq, splits +
1]``); each writes its normalised partial output and base-2 log-sum-exp into fp32 scratch, and a
second kernel combines them, one program per (window row, head, 64 output columns). With one
split a single kernel does everything. The split count depends only on the shapes known when a CUDA graph is captured (batch size, window
width, heads, SM count), never on the context length, so a captured graph stays valid for every
length. The same kernels serve the DFlash drafter's block (causal or full, sliding window).

Numerics: bf16 / fp16 dots with fp32 accumulation (``input_precision="ieee"`` for fp32 inputs),
softmax in base 2, masked scores at a finite -1e30 and masked weights forced to zero, so no NaN
arises from fully masked blocks or empty splits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from ...config import TREE_ATTN_MIN_BLOCKS, TREE_ATTN_PACK_GQA

_NEG = -1.0e30
_LOG2E = 1.4426950408889634
MAX_SPLITS = 32
MIN_BLOCKS = 2  # key blocks per context range at least
_WAVES = 8  # programs per SM the split count aims for


@dataclass(frozen=True)
class SplitPlan:
    """Launch shape: ``block_m`` rows and ``block_n`` keys per iteration, ``q_blocks`` row blocks
    per request, at most ``splits`` context ranges per (request, head, row block), each of at
    least ``min_blocks`` key blocks (fewer ranges for a short context). A row is a window query
    of one q head, or with ``pack_gqa`` a (window query, q head) pair of one KV head's group: the
    group's heads then share each key and value load."""

    block_m: int
    block_n: int
    q_blocks: int
    splits: int
    num_warps: int
    num_stages: int
    min_blocks: int = MIN_BLOCKS
    pack_gqa: bool = False


def split_plan(bs: int, max_q_len: int, num_q_heads: int, head_dim: int, sm_count: int,
               capability: tuple = (9, 0), min_blocks: int = None, group: int = 1, pack_gqa: bool = None) -> SplitPlan:
    """The launch shape for ``bs`` requests of at most ``max_q_len`` window tokens: enough
    (request, head, row block, split) programs for ``_WAVES`` per SM, at most ``MAX_SPLITS``
    splits, each of at least ``min_blocks`` key blocks (default: ``SGLANG_DDTREE_TREE_ATTN_MIN_BLOCKS``
    when set, else ``MIN_BLOCKS``). ``group``: q heads per KV head; ``pack_gqa`` (default:
    ``SGLANG_DDTREE_TREE_ATTN_PACK_GQA``) packs each group's heads into one program's rows, up to
    64 rows a block. ``capability`` (major, minor): sm_120 parts have ~100 KB of shared memory
    per block, so they get one pipeline stage."""
    if pack_gqa is None:
        pack_gqa = bool(TREE_ATTN_PACK_GQA.get())
    pack_gqa = bool(pack_gqa) and group > 1
    rows = max(max_q_len, 1) * (group if pack_gqa else 1)
    block_m = 16 if rows <= 16 else 32 if (rows <= 32 or not pack_gqa) else 64
    q_blocks = triton.cdiv(rows, block_m)
    heads = num_q_heads // group if pack_gqa else num_q_heads
    base = max(bs * q_blocks * heads, 1)
    splits = max(1, min(MAX_SPLITS, (_WAVES * sm_count) // base))
    block_n = 64 if head_dim <= 128 else 32
    stages = 1 if capability[0] == 12 else 2
    warps = 8 if block_m * head_dim >= 64 * 256 else 4
    if min_blocks is None:
        min_blocks = TREE_ATTN_MIN_BLOCKS.get() or MIN_BLOCKS
    if min_blocks < 1:
        raise ValueError(f"tree attention: min_blocks must be at least 1, got {min_blocks}")
    return SplitPlan(block_m, block_n, q_blocks, splits, warps, stages, min_blocks, pack_gqa)


def supports(q: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor, k_tree: torch.Tensor) -> bool:
    """Whether these tensors fit the kernels: 3-D ``[rows, heads, dim]`` with unit last stride,
    one head dim for q, k and v (a power of two from 16 to 256), q's heads a multiple of the KV
    heads, the pool in q's dtype (bf16 or fp16; fp32 is for tests)."""
    if q.dim() != 3 or k_buffer.dim() != 3 or v_buffer.dim() != 3 or k_tree.dim() != 3:
        return False
    D = q.shape[-1]
    if D not in (16, 32, 64, 128, 256) or k_buffer.shape[-1] != D or v_buffer.shape[-1] != D:
        return False
    if q.shape[1] % k_buffer.shape[1] or k_tree.shape[1] != k_buffer.shape[1]:
        return False
    if any(t.stride(-1) != 1 for t in (q, k_buffer, v_buffer, k_tree)):
        return False
    return q.dtype in (torch.bfloat16, torch.float16, torch.float32) and k_buffer.dtype == q.dtype \
        and v_buffer.dtype == q.dtype


@triton.jit
def _softmax_step(m_i, l_i, acc, qk, allowed, v, PREC: tl.constexpr):
    """One online-softmax step (base 2): scores ``qk`` [M, N] fp32 already scaled, ``allowed``
    [M, N], values ``v`` [N, D]."""
    qk = tl.where(allowed, qk, -1.0e30)
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.where(allowed, tl.exp2(qk - m_new[:, None]), 0.0)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
    return m_new, l_i, acc


@triton.jit
def _context_loop(q, m_i, l_i, acc, K_buf, V_buf, KV_indices, kv0, lo, hi, hkv, scale,
                  stride_kbs, stride_kbh, stride_vbs, stride_vbh, mask_m, qi, P,
                  D: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr, WINDOW: tl.constexpr):
    """The committed context ``lo .. hi`` of one request (slots from ``KV_indices[kv0 + ..]``; ``P``
    keys in all; ``qi`` each row's window query: the sliding-window rule when ``WINDOW > 0``)."""
    offs_d = tl.arange(0, D)
    for start in range(lo, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        slot = tl.load(KV_indices + kv0 + offs_n, mask=mask_n, other=0).to(tl.int64)
        k = tl.load(K_buf + slot[None, :] * stride_kbs + hkv * stride_kbh + offs_d[:, None],
                    mask=mask_n[None, :], other=0.0)
        qk = tl.dot(q, k, input_precision=PREC) * scale
        v = tl.load(V_buf + slot[:, None] * stride_vbs + hkv * stride_vbh + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        allowed = mask_m[:, None] & mask_n[None, :]
        if WINDOW > 0:
            allowed = allowed & ((P + qi[:, None]) <= (offs_n[None, :] + WINDOW))
        m_i, l_i, acc = _softmax_step(m_i, l_i, acc, qk, allowed, v, PREC)
    return m_i, l_i, acc


@triton.jit
def _split_len(P, SPLITS: tl.constexpr, BLOCK_N: tl.constexpr, MIN_BLOCKS: tl.constexpr):
    """Context tokens per split: ``P`` over ``SPLITS`` in whole key blocks, at least
    ``MIN_BLOCKS`` blocks (a short context uses fewer splits; the merge reads only those)."""
    return tl.maximum(tl.cdiv(tl.cdiv(P, SPLITS), BLOCK_N), MIN_BLOCKS) * BLOCK_N


@triton.jit
def _row_block(QO_indptr, KV_indptr, pid, h1, Q_BLOCKS: tl.constexpr, BLOCK_M: tl.constexpr,
               GROUP: tl.constexpr, PACK: tl.constexpr):
    """Program ``pid``'s request ``b`` and row block ``qb``, and the rows of the block. Without
    ``PACK`` a row is a window query of q head ``h1``; with ``PACK`` the block's rows run over
    (window query, q head of KV head ``h1``'s group), so the group shares one pass over the keys.
    Returns the window's first row ``q0`` and length, the context's first index and length ``P``,
    per row its window query ``qi``, q head ``hq`` and token row, the row mask, the number of
    rows, the KV head, and ``end``: window keys past it are never an ancestor of the block's rows."""
    b = pid // Q_BLOCKS
    qb = pid % Q_BLOCKS
    q0 = tl.load(QO_indptr + b)
    q_len = tl.load(QO_indptr + b + 1) - q0
    kv0 = tl.load(KV_indptr + b)
    P = tl.load(KV_indptr + b + 1) - kv0
    offs_r = qb * BLOCK_M + tl.arange(0, BLOCK_M)
    if PACK:
        qi = offs_r // GROUP
        hq = h1 * GROUP + offs_r % GROUP
        hkv = h1
        n_rows = q_len * GROUP
        end = tl.minimum(q_len, ((qb + 1) * BLOCK_M - 1) // GROUP + 1)
    else:
        qi = offs_r
        hq = h1 + 0 * offs_r
        hkv = h1 // GROUP
        n_rows = q_len
        end = tl.minimum(q_len, (qb + 1) * BLOCK_M)
    mask_m = offs_r < n_rows
    rows = (q0 + qi).to(tl.int64)
    return b, qb, q0, q_len, kv0, P, qi, hq, rows, mask_m, n_rows, hkv, end


@triton.jit
def _load_q(Q, rows, hq, mask_m, stride_qt, stride_qh, D: tl.constexpr):
    """The block's queries ``[BLOCK_M, D]`` (zeros past the window)."""
    return tl.load(Q + rows[:, None] * stride_qt + hq[:, None] * stride_qh + tl.arange(0, D)[None, :],
                   mask=mask_m[:, None], other=0.0)


@triton.jit
def _window_loop(q, m_i, l_i, acc, K_tree, V_tree, Mask, Mask_indptr, b, q0, q_len, P, end, qi, mask_m, hkv, scale,
                 stride_kt, stride_kh, stride_vt, stride_vh, D: tl.constexpr,
                 BLOCK_N: tl.constexpr, PREC: tl.constexpr, WINDOW: tl.constexpr, MASK_MODE: tl.constexpr):
    """The window's own keys for the block's rows (``MASK_MODE`` 0: the custom mask, 1: causal,
    2: every window key; the sliding-window rule when ``WINDOW > 0``); keys ``end ..`` are
    skipped unless every window key is visible."""
    offs_d = tl.arange(0, D)
    if MASK_MODE == 2:
        end = q_len
    for start in range(0, end, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        mask_n = offs_n < end
        keys = (q0 + offs_n).to(tl.int64)
        k = tl.load(K_tree + keys[None, :] * stride_kt + hkv * stride_kh + offs_d[:, None], mask=mask_n[None, :], other=0.0)
        qk = tl.dot(q, k, input_precision=PREC) * scale
        allowed = mask_m[:, None] & mask_n[None, :]
        if MASK_MODE == 0:
            mask0 = tl.load(Mask_indptr + b).to(tl.int64)
            bits = tl.load(Mask + mask0 + qi[:, None].to(tl.int64) * (P + q_len).to(tl.int64) + P
                           + offs_n[None, :], mask=allowed, other=0)
            allowed = allowed & (bits != 0)
        elif MASK_MODE == 1:
            allowed = allowed & (qi[:, None] >= offs_n[None, :])
        if WINDOW > 0:
            allowed = allowed & (qi[:, None] <= offs_n[None, :] + WINDOW)
        v = tl.load(V_tree + keys[:, None] * stride_vt + hkv * stride_vh + offs_d[None, :], mask=mask_n[:, None], other=0.0)
        m_i, l_i, acc = _softmax_step(m_i, l_i, acc, qk, allowed, v, PREC)
    return m_i, l_i, acc


@triton.jit
def _tree_attn_split_kernel(Q, K_tree, V_tree, K_buf, V_buf, QO_indptr, KV_indptr, KV_indices, Mask, Mask_indptr,
                            Mid_O, Mid_L, scale, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                            stride_kbs, stride_kbh, stride_vbs, stride_vbh,
                            stride_mo_t, stride_mo_h, stride_mo_s, stride_ml_t, stride_ml_h,
                            GROUP: tl.constexpr, Q_BLOCKS: tl.constexpr, SPLITS: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, PREC: tl.constexpr,
                            MIN_BLOCKS: tl.constexpr, WINDOW: tl.constexpr, MASK_MODE: tl.constexpr,
                            PACK: tl.constexpr):
    """Grid ``[bs * Q_BLOCKS, Hq (Hkv with PACK), SPLITS + 1]``: part ``s`` of one request's row
    block -> its normalised partial output and base-2 lse per row. Parts ``0 .. SPLITS-1``:
    ranges of the committed context (a range past the context, or one the sliding window hides,
    has lse -1e30 and its output is not written); part ``SPLITS``: the window's own keys."""
    s = tl.program_id(2)
    b, qb, q0, q_len, kv0, P, qi, hq, rows, mask_m, n_rows, hkv, end = _row_block(
        QO_indptr, KV_indptr, tl.program_id(0), tl.program_id(1), Q_BLOCKS, BLOCK_M, GROUP, PACK)
    if qb * BLOCK_M >= n_rows:
        return
    per = _split_len(P, SPLITS, BLOCK_N, MIN_BLOCKS)
    p_l = Mid_L + rows * stride_ml_t + hq * stride_ml_h + s
    if s < SPLITS and s * per >= P:  # a range past the context: nothing to read
        tl.store(p_l, tl.full([BLOCK_M], -1.0e30, tl.float32), mask=mask_m)
        return
    q = _load_q(Q, rows, hq, mask_m, stride_qt, stride_qh, D)
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if s == SPLITS:
        m_i, l_i, acc = _window_loop(q, m_i, l_i, acc, K_tree, V_tree, Mask, Mask_indptr, b, q0, q_len, P, end, qi,
                                     mask_m, hkv, scale, stride_kt, stride_kh, stride_vt, stride_vh, D, BLOCK_N, PREC,
                                     WINDOW, MASK_MODE)
    else:
        lo = s * per
        hi = tl.minimum(lo + per, P)
        m_i, l_i, acc = _context_loop(q, m_i, l_i, acc, K_buf, V_buf, KV_indices, kv0, lo, hi, hkv, scale,
                                      stride_kbs, stride_kbh, stride_vbs, stride_vbh, mask_m, qi, P, D, BLOCK_N,
                                      PREC, WINDOW)
    has = l_i > 0
    l_safe = tl.where(has, l_i, 1.0)
    tl.store(p_l, tl.where(has, m_i + tl.log2(l_safe), -1.0e30), mask=mask_m)
    offs_d = tl.arange(0, D)
    tl.store(Mid_O + rows[:, None] * stride_mo_t + hq[:, None] * stride_mo_h + s * stride_mo_s + offs_d[None, :],
             acc / l_safe[:, None], mask=(mask_m & has)[:, None])


@triton.jit
def _tree_attn_combine_kernel(O, Mid_O, Mid_L, QO_indptr, bs, stride_ot, stride_oh, stride_mo_t, stride_mo_h,
                              stride_mo_s, stride_ml_t, stride_ml_h, PARTS: tl.constexpr, PARTS_P2: tl.constexpr,
                              DV: tl.constexpr):
    """Grid ``[T, Hq, D // DV]``: one window row, head and ``DV`` columns of the output from the
    ``PARTS`` partials (rows past the last window are left as they are)."""
    t = tl.program_id(0)
    hq = tl.program_id(1)
    if t >= tl.load(QO_indptr + bs):
        return
    offs_s = tl.arange(0, PARTS_P2)
    lse = tl.load(Mid_L + t * stride_ml_t + hq * stride_ml_h + offs_s, mask=offs_s < PARTS, other=-1.0e30)
    live = lse > -1.0e29
    m = tl.max(lse, 0)
    w = tl.where(live, tl.exp2(lse - m), 0.0)
    l = tl.sum(w, 0)
    offs_d = tl.program_id(2) * DV + tl.arange(0, DV)
    part = tl.load(Mid_O + t * stride_mo_t + hq * stride_mo_h + offs_s[:, None] * stride_mo_s + offs_d[None, :],
                   mask=live[:, None], other=0.0)
    out = tl.sum(part * w[:, None], 0) / tl.where(l > 0, l, 1.0)
    tl.store(O + t * stride_ot + hq * stride_oh + offs_d, out.to(O.dtype.element_ty))


@triton.jit
def _tree_attn_single_kernel(Q, K_tree, V_tree, O, K_buf, V_buf, KV_indptr, KV_indices, QO_indptr, Mask, Mask_indptr,
                             scale, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot,
                             stride_oh, stride_kbs, stride_kbh, stride_vbs, stride_vbh,
                             GROUP: tl.constexpr, Q_BLOCKS: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, D: tl.constexpr, PREC: tl.constexpr, WINDOW: tl.constexpr,
                             MASK_MODE: tl.constexpr, PACK: tl.constexpr):
    """Grid ``[bs * Q_BLOCKS, Hq (Hkv with PACK)]`` (one split): the window's own keys, then the
    whole context, of one request's row block, in one program."""
    b, qb, q0, q_len, kv0, P, qi, hq, rows, mask_m, n_rows, hkv, end = _row_block(
        QO_indptr, KV_indptr, tl.program_id(0), tl.program_id(1), Q_BLOCKS, BLOCK_M, GROUP, PACK)
    if qb * BLOCK_M >= n_rows:
        return
    q = _load_q(Q, rows, hq, mask_m, stride_qt, stride_qh, D)
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    m_i, l_i, acc = _window_loop(q, m_i, l_i, acc, K_tree, V_tree, Mask, Mask_indptr, b, q0, q_len, P, end, qi,
                                 mask_m, hkv, scale, stride_kt, stride_kh, stride_vt, stride_vh, D, BLOCK_N, PREC,
                                 WINDOW, MASK_MODE)
    m_i, l_i, acc = _context_loop(q, m_i, l_i, acc, K_buf, V_buf, KV_indices, kv0, 0, P, hkv, scale,
                                  stride_kbs, stride_kbh, stride_vbs, stride_vbh, mask_m, qi, P, D, BLOCK_N,
                                  PREC, WINDOW)
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    offs_d = tl.arange(0, D)
    tl.store(O + rows[:, None] * stride_ot + hq[:, None] * stride_oh + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=mask_m[:, None])


_DEVICE_FACTS = {}  # device index -> (SM count, (major, minor))


def _device_facts(device: torch.device):
    if device.type != "cuda":
        return 16, (9, 0)  # the Triton interpreter
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _DEVICE_FACTS:
        p = torch.cuda.get_device_properties(idx)
        _DEVICE_FACTS[idx] = (p.multi_processor_count, (p.major, p.minor))
    return _DEVICE_FACTS[idx]


def tree_attention_fwd(q: torch.Tensor, k_tree: torch.Tensor, v_tree: torch.Tensor, o: torch.Tensor,
                       k_buffer: torch.Tensor, v_buffer: torch.Tensor, qo_indptr: torch.Tensor,
                       kv_indptr: torch.Tensor, kv_indices: torch.Tensor, custom_mask, mask_indptr,
                       max_q_len: int, sm_scale: float, plan: SplitPlan = None, causal: bool = True,
                       sliding_window: int = -1) -> SplitPlan:
    """Writes ``o`` (see the module docstring for the shapes and the masks); ``max_q_len``: the
    largest window (a host int, the same every replay of a captured graph). Returns the launch
    shape used. Raises ValueError where :func:`supports` is false and for a custom mask with
    ``causal=False``."""
    if not supports(q, k_buffer, v_buffer, k_tree) or v_tree.shape != k_tree.shape or o.shape != q.shape:
        raise ValueError(f"tree attention: unsupported shapes or dtypes q {tuple(q.shape)} {q.dtype}, "
                         f"k_buffer {tuple(k_buffer.shape)} {k_buffer.dtype}, k_tree {tuple(k_tree.shape)}")
    if custom_mask is not None and not causal:
        raise ValueError("tree attention: a custom mask is served only with causal=True (topological windows)")
    mask_mode = 0 if custom_mask is not None else (1 if causal else 2)
    window = int(sliding_window) if sliding_window is not None and sliding_window > 0 else 0
    if custom_mask is None:
        custom_mask = mask_indptr = qo_indptr  # never read
    bs = qo_indptr.shape[0] - 1
    T, Hq, D = q.shape
    group = Hq // k_buffer.shape[1]
    if plan is None:
        sms, cap = _device_facts(q.device)
        plan = split_plan(bs, max_q_len, Hq, D, sms, cap, group=group)
    elif plan.pack_gqa and group == 1:
        plan = replace(plan, pack_gqa=False)
    prec = "ieee" if q.dtype == torch.float32 else "tf32"
    scale = float(sm_scale) * _LOG2E
    strides = (q.stride(0), q.stride(1), k_tree.stride(0), k_tree.stride(1), v_tree.stride(0), v_tree.stride(1))
    heads = Hq // group if plan.pack_gqa else Hq  # grid axis 1: KV heads when the group is packed
    pool = (k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0), v_buffer.stride(1))
    if plan.splits == 1:
        _tree_attn_single_kernel[(bs * plan.q_blocks, heads)](
            q, k_tree, v_tree, o, k_buffer, v_buffer, kv_indptr, kv_indices, qo_indptr, custom_mask, mask_indptr,
            scale, *strides, o.stride(0), o.stride(1), *pool,
            GROUP=group, Q_BLOCKS=plan.q_blocks, BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, D=D, PREC=prec,
            WINDOW=window, MASK_MODE=mask_mode, PACK=plan.pack_gqa, num_warps=plan.num_warps,
            num_stages=plan.num_stages)
        return plan
    parts = plan.splits + 1  # the context ranges and the window's own part
    mid_o = torch.empty(T, Hq, parts, D, dtype=torch.float32, device=q.device)
    mid_l = torch.empty(T, Hq, parts, dtype=torch.float32, device=q.device)
    mid = (mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0), mid_l.stride(1))
    _tree_attn_split_kernel[(bs * plan.q_blocks, heads, parts)](
        q, k_tree, v_tree, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr,
        mid_o, mid_l, scale, *strides, *pool, *mid,
        GROUP=group, Q_BLOCKS=plan.q_blocks, SPLITS=plan.splits, BLOCK_M=plan.block_m, BLOCK_N=plan.block_n,
        D=D, PREC=prec, MIN_BLOCKS=plan.min_blocks, WINDOW=window, MASK_MODE=mask_mode, PACK=plan.pack_gqa,
        num_warps=plan.num_warps, num_stages=plan.num_stages)
    dv = min(D, 64)
    _tree_attn_combine_kernel[(T, Hq, D // dv)](
        o, mid_o, mid_l, qo_indptr, bs, o.stride(0), o.stride(1), *mid,
        PARTS=parts, PARTS_P2=triton.next_power_of_2(parts), DV=dv, num_warps=1)
    return plan
