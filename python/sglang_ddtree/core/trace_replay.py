"""Replay lookup: what a drafter trace (``core/traces.py``, docs/traces.md) says a drafter
proposes and a greedy target answers, for a batch of requests at their current states, as
fixed-shape gathers on the device (no host synchronisation, CUDA-graph friendly).

A :class:`ReplayTable` holds every request of a trace set concatenated: request ``r``'s output
tokens are ``outputs[out_start[r] : out_start[r] + out_len[r]]`` and its proposal rows are the
same indices of ``topk_ids`` / ``topk_logprobs``. A batch row names its trace request by index
(``req [bs]``, int64 on the table's device).

- **State.** In a decode step the committed KV length ``seq_len`` excludes the step's root (the
  last committed token), so the state is ``p = seq_len - prompt_len + 1`` (:meth:`states`).
- **Proposals.** From state ``p`` the drafter proposes row ``p`` (:meth:`proposals`, the chain:
  :meth:`chain`); a state outside ``1 .. T - 1`` reads the nearest recorded row (row 0 holds no
  proposal; a request decoding past its output reads row ``T - 1``).
- **Target.** The target's greedy token after sequence position ``pos`` (the token at ``pos``
  being prompt or output) is ``output[pos + 1 - prompt_len]`` (:meth:`targets`): at a verify
  position of depth ``d`` from state ``p`` (``pos = prompt_len + p - 1 + d``) that is
  ``output[p + d]``, as ``trace_sim.trace_targets``; after a prefill (``pos = prompt_len - 1``)
  ``output[0]``. Outside the output it is ``filler``, one token id no proposal of the table
  carries, so no draft is accepted there (the trace's ``-1``, made a real token).

Plain torch, no sglang import; ``*_reference`` are plain per-request loops for the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import torch

from .traces import RequestTrace, TopKShape


@dataclass
class ReplayTable(TopKShape):
    """The concatenated traces (module docstring); ``R`` requests, ``N`` output tokens in all.

    ``prompt_len``, ``out_start``, ``out_len``: ``[R]`` int64; ``outputs``: ``[N]`` int64;
    ``topk_ids`` ``[N, L, K]`` int64 and ``topk_logprobs`` ``[N, L, K]`` float32 (row
    ``out_start[r]`` of request ``r`` empty); ``filler``: the token outside every output."""

    prompt_len: torch.Tensor
    out_start: torch.Tensor
    out_len: torch.Tensor
    outputs: torch.Tensor
    topk_ids: torch.Tensor
    topk_logprobs: torch.Tensor
    filler: int

    @classmethod
    def from_traces(cls, traces: Sequence[RequestTrace], device=None,
                    vocab_size: Optional[int] = None) -> "ReplayTable":
        """The table of ``traces`` (one ``[L, K]``, each with at least one recorded position,
        ``T >= 2``) on ``device``. ``filler`` is the smallest id below ``vocab_size`` (default: one
        past the largest id of the traces) that no proposal carries. ValueError otherwise, or
        for token ids at or past ``vocab_size``."""
        traces = list(traces)
        if not traces:
            raise ValueError("replay: a trace set without requests")
        if len({(t.depth, t.topk) for t in traces}) != 1:
            raise ValueError("replay: traces of different (L, K)")
        short = [t.rid for t in traces if t.output.shape[0] < 2]
        if short:
            raise ValueError(f"replay: requests {short[:5]} have no recorded proposal (output of one token)")
        lens = torch.tensor([int(t.output.shape[0]) for t in traces], dtype=torch.long)
        start = torch.cumsum(lens, 0) - lens
        outputs = torch.cat([t.output.long() for t in traces])
        ids = torch.cat([t.topk_ids.long() for t in traces])
        lp = torch.cat([t.topk_logprobs.float() for t in traces])
        used = torch.unique(ids[ids >= 0])
        top = int(max(int(outputs.max()), int(used.max()) if used.numel() else -1))
        vocab = top + 2 if vocab_size is None else int(vocab_size)
        if top >= vocab:
            raise ValueError(f"replay: the trace has token id {top}, the engine's vocabulary {vocab} tokens")
        free = torch.ones(vocab, dtype=torch.bool)
        free[used] = False
        if not bool(free.any()):
            raise ValueError("replay: every token id of the vocabulary is proposed somewhere; no filler token")
        filler = int(free.nonzero()[0, 0])
        return cls(prompt_len=torch.tensor([int(t.prompt.shape[0]) for t in traces], dtype=torch.long).to(device),
                   out_start=start.to(device), out_len=lens.to(device), outputs=outputs.to(device),
                   topk_ids=ids.to(device), topk_logprobs=lp.to(device), filler=filler)

    def states(self, req: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
        """``[bs]`` int64 states ``seq_lens - prompt_len[req] + 1`` of decode steps whose
        committed KV lengths (root excluded) are ``seq_lens [bs]``."""
        return seq_lens.long() - self.prompt_len[req] + 1

    def _rows(self, req: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``[bs]`` table rows of the proposals at ``state``, clamped to ``1 .. T - 1``."""
        last = self.out_len[req] - 1
        return self.out_start[req] + torch.minimum(state.long().clamp(min=1), last)

    def proposals(self, req: torch.Tensor, state: torch.Tensor, topk: Optional[int] = None
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The drafter's per-depth top-``topk`` (default K) at ``state [bs]`` of requests
        ``req [bs]``: ``(lp [bs, L, topk] float32 descending, ids [bs, L, topk] int64)``."""
        k = self.topk if topk is None else int(topk)
        if not 1 <= k <= self.topk:
            raise ValueError(f"replay: top-{k} asked, the trace recorded the top-{self.topk}")
        rows = self._rows(req, state)
        return self.topk_logprobs[rows, :, :k], self.topk_ids[rows, :, :k]

    def chain(self, req: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``[bs, L]`` int64: the rank-0 proposal of every depth (what DFLASH drafts)."""
        return self.topk_ids[self._rows(req, state), :, 0]

    def targets(self, req: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The target's greedy token after each sequence position: ``positions [bs, ...]`` of
        requests ``req [bs]`` -> int64 of the same shape, ``output[pos + 1 - prompt_len]``,
        ``filler`` outside the output."""
        shape = (-1,) + (1,) * (positions.dim() - 1)
        idx = positions.long() + 1 - self.prompt_len[req].view(shape)
        n = self.out_len[req].view(shape)
        known = (idx >= 0) & (idx < n)
        tok = self.outputs[self.out_start[req].view(shape) + torch.minimum(idx.clamp(min=0), n - 1)]
        return torch.where(known, tok, torch.full_like(tok, self.filler))


def onehot_logits_(logits: torch.Tensor, tokens: torch.Tensor, low: float = -1.0e4) -> torch.Tensor:
    """``logits [n, V]`` in place: 0 at ``tokens [n]``, ``low`` elsewhere (finite in every float
    dtype: its softmax puts all mass on the token, at any temperature)."""
    logits.fill_(low)
    logits.scatter_(1, tokens.long().view(-1, 1), 0.0)
    return logits


# ----------------------------------------------------------------------------- references

def proposals_reference(traces: Sequence[RequestTrace], req: Sequence[int], states: Sequence[int],
                        topk: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:meth:`ReplayTable.proposals` as a loop over requests (CPU)."""
    lps, ids = [], []
    for r, p in zip(req, states):
        t = traces[r]
        row = min(max(int(p), 1), int(t.output.shape[0]) - 1)
        k = t.topk if topk is None else topk
        lps.append(t.topk_logprobs[row, :, :k].float())
        ids.append(t.topk_ids[row, :, :k].long())
    return torch.stack(lps), torch.stack(ids)


def targets_reference(traces: Sequence[RequestTrace], req: Sequence[int], positions: Sequence[Sequence[int]],
                      filler: int) -> torch.Tensor:
    """:meth:`ReplayTable.targets` for ``positions [bs, W]`` as a loop (CPU)."""
    out = []
    for r, row in zip(req, positions):
        t = traces[r]
        P, T = int(t.prompt.shape[0]), int(t.output.shape[0])
        out.append([int(t.output[i]) if 0 <= (i := int(pos) + 1 - P) < T else filler for pos in row])
    return torch.tensor(out, dtype=torch.long)
