"""Fused top-K and logsumexp over a vocabulary shard (Triton): the drafter head's ranking,
without an fp32 copy of the logits or a radix select over the whole vocabulary.

    logits [N, V]  any float dtype, rows of one vocabulary shard (stride of the last dim 1)
    ->  keys [N, K] int64 best first, lse [N] fp32

Exactly :func:`sglang_ddtree.core.topk.local_topk` (its plain-torch reference): ranked by the
fp32 value of each logit, ties to the lower token id, keys from
``core.order_keys.desc_value_asc_tiebreak`` with ``core.topk.ID_BITS``; ``lse`` is the shard's
logsumexp in fp32 (summed per chunk, then across chunks: not bit-equal to ``torch.logsumexp``,
within 1e-6 relative). Logits must not be NaN (as for the reference).

Two launches: (1) grid ``(N, chunks)``: each program takes ``CHUNK`` columns of a row, its max,
its sum of ``exp(x - max)`` and its own top-K (K rounds of max, then the lowest id at the max);
(2) grid ``(N,)``: the row's logsumexp from the chunks' and the top-K of the chunks' candidates
(the global top-K is among them: each chunk kept its K best in the same order).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..core.order_keys import desc_value_asc_tiebreak
from ..core.topk import ID_BITS

CHUNK = 4096
MAX_K = 64  # candidates per row and chunk; beyond this the torch path is used
_NO_ID = 2**31 - 1


@triton.jit
def _top_k(v, ids, live, K: tl.constexpr, KP: tl.constexpr, NO_ID: tl.constexpr):
    """The K best of the ``live`` entries of ``v`` (fp32) with their ``ids`` (int32, unique among
    the live ones), best first, ties to the lower id: ``[KP]`` values (-inf past the live ones)
    and ids (``NO_ID`` there)."""
    slot = tl.arange(0, KP)
    top_v = tl.full([KP], float("-inf"), tl.float32)
    top_i = tl.full([KP], NO_ID, tl.int32)
    for i in tl.static_range(K):
        best = tl.max(tl.where(live, v, float("-inf")), 0)
        pick = tl.min(tl.where(live & (v == best), ids, NO_ID), 0)
        top_v = tl.where(slot == i, best, top_v)
        top_i = tl.where(slot == i, pick, top_i)
        live = live & (ids != pick)
    return top_v, top_i


@triton.jit
def _chunk_topk_kernel(logits, s_row, V, n_chunks, cand_val, cand_id, chunk_max, chunk_sum,
                       K: tl.constexpr, KP: tl.constexpr, CHUNK: tl.constexpr, NO_ID: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    offs = c * CHUNK + tl.arange(0, CHUNK)
    live = offs < V
    x = tl.load(logits + row.to(tl.int64) * s_row + offs, mask=live, other=float("-inf")).to(tl.float32)
    mx = tl.max(x, 0)
    e = tl.where(live & (x > float("-inf")), tl.exp(x - mx), 0.0)
    tl.store(chunk_max + row * n_chunks + c, mx)
    tl.store(chunk_sum + row * n_chunks + c, tl.sum(e, 0))
    vals, ids = _top_k(x, offs, live, K, KP, NO_ID)
    slot = tl.arange(0, KP)
    base = (row * n_chunks + c) * K
    tl.store(cand_val + base + slot, vals, mask=slot < K)
    tl.store(cand_id + base + slot, ids, mask=slot < K)


@triton.jit
def _merge_topk_kernel(cand_val, cand_id, chunk_max, chunk_sum, n_chunks, out_val, out_id, out_lse,
                       K: tl.constexpr, KP: tl.constexpr, NCP: tl.constexpr, CP: tl.constexpr,
                       NO_ID: tl.constexpr):
    row = tl.program_id(0)
    o_c = tl.arange(0, NCP)
    cm = tl.load(chunk_max + row * n_chunks + o_c, mask=o_c < n_chunks, other=float("-inf"))
    cs = tl.load(chunk_sum + row * n_chunks + o_c, mask=o_c < n_chunks, other=0.0)
    m = tl.max(cm, 0)
    total = tl.sum(tl.where(cm > float("-inf"), cs * tl.exp(cm - m), 0.0), 0)
    tl.store(out_lse + row, m + tl.log(total))
    n = n_chunks * K
    o = tl.arange(0, CP)
    v = tl.load(cand_val + row * n + o, mask=o < n, other=float("-inf"))
    ids = tl.load(cand_id + row * n + o, mask=o < n, other=NO_ID)
    top_v, top_i = _top_k(v, ids, (o < n) & (ids != NO_ID), K, KP, NO_ID)
    slot = tl.arange(0, KP)
    tl.store(out_val + row * K + slot, top_v, mask=slot < K)
    tl.store(out_id + row * K + slot, top_i, mask=slot < K)


def supported(logits: torch.Tensor, k: int) -> bool:
    """Whether :func:`local_topk_fused` takes these logits (else use ``core.topk.local_topk``)."""
    return (logits.is_cuda or logits.device.type == "cpu" and _interpreted()) and 1 <= k <= MAX_K \
        and logits.shape[-1] >= k and logits.stride(-1) == 1 and logits.shape[-1] < 2**31 - 1


def _interpreted() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


def local_topk_fused(logits: torch.Tensor, k: int, vocab_start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``core.topk.local_topk`` in two kernel launches: ``logits [..., V]`` -> keys ``[..., k]``
    int64 best first (global ids from ``vocab_start``), lse ``[...]`` fp32. Needs
    :func:`supported`; raises ``ValueError`` otherwise."""
    if not supported(logits, k):
        raise ValueError(f"local_topk_fused: unsupported logits {tuple(logits.shape)} on {logits.device} with k={k} "
                         f"(needs CUDA, a unit-stride last dim, 1 <= k <= min({MAX_K}, V))")
    if vocab_start + logits.shape[-1] > 1 << ID_BITS:
        raise ValueError(f"local_topk_fused: vocabulary ids must be < 2**{ID_BITS}")
    lead, V = tuple(logits.shape[:-1]), logits.shape[-1]
    x = logits.reshape(-1, V)
    if x.stride(-1) != 1:
        x = x.contiguous()
    N = x.shape[0]
    n_chunks = triton.cdiv(V, CHUNK)
    dev = x.device
    cand_val = torch.empty((N, n_chunks, k), dtype=torch.float32, device=dev)
    cand_id = torch.empty((N, n_chunks, k), dtype=torch.int32, device=dev)
    chunk_max = torch.empty((N, n_chunks), dtype=torch.float32, device=dev)
    chunk_sum = torch.empty((N, n_chunks), dtype=torch.float32, device=dev)
    out_val = torch.empty((N, k), dtype=torch.float32, device=dev)
    out_id = torch.empty((N, k), dtype=torch.int32, device=dev)
    lse = torch.empty((N,), dtype=torch.float32, device=dev)
    if N:
        kp = triton.next_power_of_2(k)
        _chunk_topk_kernel[(N, n_chunks)](x, x.stride(0), V, n_chunks, cand_val, cand_id, chunk_max, chunk_sum,
                                          K=k, KP=kp, CHUNK=CHUNK, NO_ID=_NO_ID, num_warps=8)
        _merge_topk_kernel[(N,)](cand_val, cand_id, chunk_max, chunk_sum, n_chunks, out_val, out_id, lse,
                                 K=k, KP=kp, NCP=triton.next_power_of_2(n_chunks),
                                 CP=triton.next_power_of_2(n_chunks * k), NO_ID=_NO_ID, num_warps=4)
    keys = desc_value_asc_tiebreak(out_val, out_id.to(torch.int64) + vocab_start, ID_BITS)
    return keys.view(*lead, k), lse.view(lead)
