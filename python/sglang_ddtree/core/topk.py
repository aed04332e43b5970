"""Per-depth top-K log-probabilities from draft logits, single rank and tensor-parallel.

Log-probabilities are log-softmax over the *full* vocabulary in fp32. Ranking uses exact keys
(``order_keys``): larger logit first, ties to the lower token id, so every rank layout and
device selects the same ids in the same order.

Tensor-parallel form (vocabulary sharded over ranks): each rank computes, on its shard,
``local_topk`` (K keys with global ids) and its shard's logsumexp; ranks all-gather those
(``K`` int64 keys + one fp32 per position and rank, never the logits), and
``merge_rank_topk`` takes the global top-K and the global logsumexp.
"""

from __future__ import annotations

from typing import Tuple

import torch

from .order_keys import desc_value_asc_tiebreak, value_of_key

# Token ids up to 2**30 (the Qwen3.6 vocabulary is 248320 < 2**18).
ID_BITS = 30


def local_topk(
    logits: torch.Tensor, k: int, vocab_start: int = 0
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Top-k keys and the logsumexp of one vocabulary shard.

    Args:
        logits: ``[..., V_shard]`` draft logits (any float dtype; ranked in fp32).
        k: candidates per position (clamped to the shard size).
        vocab_start: global id of the shard's first column.
    Returns:
        keys ``[..., k]`` int64 sorted best first; lse ``[...]`` fp32 logsumexp of the shard.

    Exact without building int64 keys over the whole vocabulary (that costs ~10x a plain
    top-k): a value top-k fixes the k-th largest value ``t``; every id above ``t`` is in the
    answer, and the remaining places go to the lowest ids equal to ``t``, found by a second
    top-k on ``-id`` over the entries equal to ``t``. Exact int64 keys are then built on the
    2k candidates only.
    """
    x = logits.float()
    v = x.shape[-1]
    k = min(k, v)
    if vocab_start + v >= (1 << 24):  # -id must be exact in fp32
        raise ValueError("local_topk: vocabulary ids must be < 2**24")
    lse = torch.logsumexp(x, dim=-1)
    top = torch.topk(x, k, dim=-1, largest=True, sorted=True)
    kth = top.values[..., -1:]
    above = top.values > kth  # these ids are in every valid top-k
    ids = torch.arange(vocab_start, vocab_start + v, device=x.device, dtype=torch.float32)
    tie_key = torch.where(x == kth, -ids, float("-inf"))
    lowest_tied = torch.topk(tie_key, k, dim=-1, largest=True, sorted=True)
    n_tied_needed = k - above.sum(-1, keepdim=True)
    slot = torch.arange(k, device=x.device)
    take_tied = (slot < n_tied_needed) & torch.isfinite(lowest_tied.values)
    cand_id = torch.cat([top.indices + vocab_start, (-lowest_tied.values).clamp(min=0).long()], -1)
    cand_val = torch.cat([top.values, kth.expand_as(top.values)], -1)
    cand_ok = torch.cat([above, take_tied], -1)
    keys = desc_value_asc_tiebreak(cand_val, cand_id, ID_BITS)
    keys = torch.where(cand_ok, keys, torch.iinfo(torch.int64).min)
    return torch.topk(keys, k, dim=-1, largest=True, sorted=True).values, lse


def merge_rank_topk(
    rank_keys: torch.Tensor, rank_lse: torch.Tensor, k: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Global top-k from all ranks' candidates.

    Args:
        rank_keys: ``[R, ..., k_r]`` keys from :func:`local_topk` on each rank.
        rank_lse: ``[R, ...]`` each shard's logsumexp.
    Returns:
        logprobs ``[..., k]`` fp32 (best first) and token ids ``[..., k]`` int64.
    """
    keys = rank_keys.movedim(0, -2).flatten(-2)  # [..., R * k_r]
    top = torch.topk(keys, min(k, keys.shape[-1]), dim=-1, largest=True, sorted=True).values
    lse = torch.logsumexp(rank_lse.float(), dim=0)
    return _decode(top, lse)


def depth_topk(logits: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Single-rank per-depth top-k log-probabilities.

    Args:
        logits: ``[bs, L, V]`` draft logits for depths 1..L.
    Returns:
        logprobs ``[bs, L, k]`` fp32 sorted descending, ids ``[bs, L, k]`` int64.
    """
    keys, lse = local_topk(logits, k)
    return _decode(keys, lse)


def _decode(keys: torch.Tensor, lse: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    span = 1 << ID_BITS
    ids = span - 1 - torch.remainder(keys, span)
    logits = value_of_key(keys, ID_BITS)
    return logits - lse.unsqueeze(-1), ids


def depth_topk_reference(logits: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Plain reference: full log-softmax; rank by (-logit, id) with a Python sort.

    Ranking by the logit (not the rounded log-prob) is the documented rule: two different
    logits can round to the same log-prob, and must still rank by value.
    """
    x = logits.float()
    lp = torch.log_softmax(x, dim=-1)
    v = lp.shape[-1]
    flat_x, flat_lp = x.reshape(-1, v), lp.reshape(-1, v)
    out_lp, out_id = [], []
    for row_x, row_lp in zip(flat_x.tolist(), flat_lp.tolist()):
        order = sorted(range(v), key=lambda i: (-row_x[i], i))[:k]
        out_id.append(order)
        out_lp.append([row_lp[i] for i in order])
    shape = tuple(lp.shape[:-1]) + (min(k, v),)
    return (
        torch.tensor(out_lp, dtype=torch.float32).view(shape),
        torch.tensor(out_id, dtype=torch.int64).view(shape),
    )
