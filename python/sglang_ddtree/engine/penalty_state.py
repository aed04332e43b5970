"""Per-request penalty state of a DDTREE server, kept on the device by request-pool slot.

sglang 0.5.17's DFLASH path never feeds a speculative step's tokens to its penalizers and its
verify applies no penalty, so DDTREE keeps what ``core.path_penalties`` needs itself, indexed by
``req_pool_indices`` (stable while a request lives, through every batch merge and filter):

    cum_freq [slots, V] fp32   the frequency penalty summed once per committed output token
    present  [slots, V] bool   the token is among the committed output tokens
    out_len  [slots] int32     committed output tokens
    stop     [slots, V] bool   the request's stop tokens (EOS, stop_token_ids) for min_new_tokens
    freq / pres / rep / min_new [slots]

Allocated when the first request with a penalty (or ``min_new_tokens``) is admitted; from then on
every admission resets its slot's row. A prefill counts the request's first token (unless the
request is still being prefilled in chunks); every decode step counts the tokens it commits
(:meth:`commit`), on the device, in output order.
"""

from __future__ import annotations

from typing import List, Optional

import torch

from ..core.path_penalties import apply_path_penalties

NEUTRAL = (("frequency_penalty", 0.0), ("presence_penalty", 0.0), ("repetition_penalty", 1.0),
           ("min_new_tokens", 0))


def _params(req) -> List[float]:
    """``req``'s frequency, presence and repetition penalties and min_new_tokens (None: neutral)."""
    sp = req.sampling_params
    return [neutral if getattr(sp, f, None) is None else getattr(sp, f) for f, neutral in NEUTRAL]


def penalised(req) -> bool:
    """Whether ``req`` asks for a penalty or ``min_new_tokens``."""
    return any(v != neutral for v, (_, neutral) in zip(_params(req), NEUTRAL))


def _stop_ids(req) -> List[int]:
    sp, tok = req.sampling_params, getattr(req, "tokenizer", None)
    ids = set(sp.stop_token_ids or ())
    if tok is not None:
        ids |= set(getattr(tok, "additional_stop_token_ids", None) or ())
        if getattr(tok, "eos_token_id", None) is not None:
            ids.add(tok.eos_token_id)
    return sorted(ids)


class PenaltyState:
    def __init__(self, slots: int, vocab: int, device):
        self.vocab = vocab
        self.cum_freq = torch.zeros(slots, vocab, dtype=torch.float32, device=device)
        self.present = torch.zeros(slots, vocab, dtype=torch.bool, device=device)
        self.stop = torch.zeros(slots, vocab, dtype=torch.bool, device=device)
        self.out_len = torch.zeros(slots, dtype=torch.int32, device=device)
        self.freq = torch.zeros(slots, dtype=torch.float32, device=device)
        self.pres = torch.zeros(slots, dtype=torch.float32, device=device)
        self.rep = torch.ones(slots, dtype=torch.float32, device=device)
        self.min_new = torch.zeros(slots, dtype=torch.int32, device=device)

    def admit(self, reqs, slots: torch.Tensor, first_tokens: torch.Tensor) -> None:
        """Reset the rows of ``reqs`` (pool ``slots [n]``) to their sampling parameters, count
        the output a request already has (one prefilled again after a retraction) and then the
        token its prefill sampled, ``first_tokens [n]``, unless it is still being prefilled."""
        dev = self.cum_freq.device
        slots = slots.long()
        p = torch.tensor([_params(r) for r in reqs], dtype=torch.float32).to(dev, non_blocking=True)
        self.freq[slots], self.pres[slots], self.rep[slots] = p[:, 0], p[:, 1], p[:, 2]
        self.min_new[slots] = p[:, 3].to(torch.int32)
        self.cum_freq[slots] = 0.0
        self.present[slots] = False
        self.out_len[slots] = 0
        stop_rows = torch.zeros(len(reqs), self.vocab, dtype=torch.bool)
        for i, r in enumerate(reqs):
            ids = [t for t in _stop_ids(r) if 0 <= t < self.vocab]
            if ids:
                stop_rows[i, ids] = True
        self.stop[slots] = stop_rows.to(dev, non_blocking=True)
        history = [list(getattr(r, "output_ids", None) or ()) for r in reqs]
        longest = max((len(h) for h in history), default=0)
        if longest:
            rows = torch.tensor([h + [0] * (longest - len(h)) for h in history], dtype=torch.long)
            self.commit(slots, rows.to(dev, non_blocking=True),
                        torch.tensor([len(h) for h in history], dtype=torch.int32).to(dev, non_blocking=True))
        done = torch.tensor([not getattr(r, "is_chunked", 0) for r in reqs], dtype=torch.bool).to(dev, non_blocking=True)
        self.commit(slots, first_tokens.view(-1, 1), done.to(torch.int32))

    def commit(self, slots: torch.Tensor, tokens: torch.Tensor, lens: torch.Tensor) -> None:
        """Count ``tokens [n, P]`` (the first ``lens [n]`` of each row, in output order) for
        pool ``slots [n]``: one fp32 addition of the frequency penalty per token."""
        slots = slots.long()
        tokens = tokens.long()
        for j in range(tokens.shape[1]):
            valid = lens > j
            t = tokens[:, j].clamp(0, self.vocab - 1)
            self.cum_freq[slots, t] = torch.where(valid, self.cum_freq[slots, t] + self.freq[slots],
                                                  self.cum_freq[slots, t])
            self.present[slots, t] = self.present[slots, t] | valid
        self.out_len[slots] += lens.to(torch.int32)

    def apply(self, logits: torch.Tensor, slots: torch.Tensor, tokens: torch.Tensor, anc: torch.Tensor,
              depth: torch.Tensor) -> None:
        """Every verify node's penalties on ``logits [bs, W, V]`` in place (``core.path_penalties``)."""
        s = slots.long()
        apply_path_penalties(logits, self.cum_freq[s], self.present[s], self.out_len[s], tokens, anc, depth,
                             self.freq[s], self.pres[s], self.rep[s], self.min_new[s], self.stop[s])


def state_for(current: Optional[PenaltyState], reqs, slots: int, vocab: int, device) -> Optional[PenaltyState]:
    """``current``, or a new state when ``reqs`` holds the first penalised request."""
    if current is None and any(penalised(r) for r in reqs):
        return PenaltyState(slots, vocab, device)
    return current
