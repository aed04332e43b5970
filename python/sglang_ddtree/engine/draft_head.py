"""The drafter's head for DDTREE: per-depth top-K log-probs through the target's lm_head,
folded into the drafter's CUDA graph.

DFLASH borrows the target's (vocab-parallel) lm_head for its draft and folds a greedy argmax
into the drafter's decode graph (sglang's ``capture_tail_hooks`` of the draft model runner).
DDTREE needs the top-K log-probs per depth instead, so :class:`DraftTopKHead` takes that place:
the same seam, the same lm_head read, and DFLASH's argmax is not captured at all.

Contract of one call, ``H`` the hidden size, ``L = block - 1`` the draft depths, ``K`` the top-K:

- input: the drafter's hidden states of the block ``[bs * block, H]`` (position 0 is the
  bonus token: its logits are computed with the block's, ``[bs * block, V]`` through ``linear``,
  and its top-K dropped, so the product reads the whole block contiguous);
- output: ``lp [bs, L, K]`` fp32 log-softmax over the whole vocabulary, best first, and
  ``ids [bs, L, K]`` int64 global token ids; ties rank the lower id first
  (``core/topk.py``, which is also the plain reference).
- on CUDA the shard is ranked by the fused kernel (``kernels/draft_topk.py``), elsewhere by
  ``core.topk.local_topk``, its reference (the same keys);
- tensor-parallel: each rank ranks its vocabulary shard (``local_topk``), the ranks all-gather
  ``K`` int64 keys and one fp32 logsumexp per position, and every rank merges the same way.

In the graph the results land in static buffers (:meth:`graph_result` reads them after a
replay); without a graph (:meth:`topk`) the same functions run eagerly.
"""

from __future__ import annotations

import torch

from ..core.topk import local_topk, merge_rank_topk
from ..kernels import draft_topk


class DraftTopKHead:
    """Top-K head over the target's lm_head (``weight [V_shard(+pad), H]``, rows
    ``[0, n_real)`` real, global ids from ``vocab_start``)."""

    def __init__(self, weight: torch.Tensor, n_real: int, vocab_start: int, block_size: int, topk: int,
                 tp_group=None, linear=None):
        if block_size < 2:
            raise ValueError(f"DraftTopKHead: the drafter's block must be >= 2 tokens, got {block_size}")
        self.weight = weight
        self.n_real = int(n_real)
        self.vocab_start = int(vocab_start)
        self.block_size = int(block_size)
        self.k = int(topk)
        self.tp_group = tp_group
        self.tp_size = int(tp_group.world_size) if tp_group is not None else 1
        # (x [T, H], weight [N, H]) -> x @ weight.T; the server's few-token product where it has one
        self.linear = linear or torch.nn.functional.linear
        self.lp = None  # [max_bs, L, K] fp32, written by the captured graph
        self.ids = None  # [max_bs, L, K] int64

    @classmethod
    def from_lm_head(cls, lm_head, block_size: int, topk: int, tp_group=None, linear=None) -> "DraftTopKHead":
        """From sglang's ``ParallelLMHead`` (``shard_indices`` name the rank's real rows);
        ``linear``: the product of the logits (default ``F.linear``)."""
        shard = lm_head.shard_indices
        if int(getattr(shard, "num_added_elements", 0)) != 0:
            raise NotImplementedError("DDTREE: an lm_head with added vocabulary is not supported")
        start = int(shard.org_vocab_start_index)
        return cls(lm_head.weight, int(shard.org_vocab_end_index) - start, start, block_size, topk,
                   tp_group if tp_group is not None and tp_group.world_size > 1 else None, linear)

    # ------------------------------------------------------------------ eager

    def topk(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``hidden [bs * block, H]`` (or ``[bs, block, H]``) -> ``(lp, ids)``, each
        ``[bs, L, K]``."""
        h = hidden.shape[-1]
        bs = hidden.numel() // (h * self.block_size)
        x = hidden.reshape(bs * self.block_size, h).to(self.weight.dtype)
        logits = self.linear(x, self.weight[: self.n_real]).view(bs, self.block_size, self.n_real)
        if draft_topk.supported(logits, self.k):  # CUDA: the fused kernel, same result
            keys, lse = draft_topk.local_topk_fused(logits, self.k, self.vocab_start)
        else:
            keys, lse = local_topk(logits, self.k, self.vocab_start)
        keys, lse = keys[:, 1:].contiguous(), lse[:, 1:].contiguous()  # the draft depths 1..block-1
        keys, lse = self._gather(keys, lse)
        return merge_rank_topk(keys, lse, self.k)

    def _gather(self, keys: torch.Tensor, lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``keys [bs, L, K]``, ``lse [bs, L]`` -> every rank's, ``[R, bs, L, K]`` / ``[R, bs, L]``."""
        if self.tp_group is None:
            return keys.unsqueeze(0), lse.unsqueeze(0)
        R = self.tp_size
        all_keys = keys.new_empty((R,) + tuple(keys.shape))
        all_lse = lse.new_empty((R,) + tuple(lse.shape))
        self.tp_group.all_gather_into_tensor(all_keys.view(-1), keys.contiguous().view(-1))
        self.tp_group.all_gather_into_tensor(all_lse.view(-1), lse.contiguous().view(-1))
        return all_keys, all_lse

    # ------------------------------------------------------------------ inside the drafter's graph

    def allocate(self, max_bs: int) -> None:
        """Static outputs for graphs of up to ``max_bs`` requests (before capture)."""
        L, K = self.block_size - 1, self.k
        self.lp = torch.empty((max_bs, L, K), dtype=torch.float32, device=self.weight.device)
        self.ids = torch.empty((max_bs, L, K), dtype=torch.int64, device=self.weight.device)

    def __call__(self, hidden_states: torch.Tensor, input_ids=None) -> None:
        """Capture hook body (``draft_sampler`` of sglang's ``make_draft_sampler_capture_hook``):
        the top-K of the captured batch into the static buffers."""
        lp, ids = self.topk(hidden_states)
        bs = lp.shape[0]
        if self.lp is None or bs > self.lp.shape[0]:
            raise RuntimeError(f"DraftTopKHead: graph batch {bs} exceeds the allocated "
                               f"{None if self.lp is None else self.lp.shape[0]}")
        self.lp[:bs].copy_(lp)
        self.ids[:bs].copy_(ids)

    def graph_result(self, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``bs`` rows written by the last replay: ``(lp, ids)`` ``[bs, L, K]``. Valid
        until the next replay of the drafter's graph (read them in the same step)."""
        return self.lp[:bs], self.ids[:bs]
