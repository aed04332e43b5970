"""``--speculative-ddtree-budget auto``: the tree budget per step from the batch size.

Each step picks the candidate with the most expected tokens per millisecond,

    value(c, bs) = (E[accepted drafts | c] + 1) / ms(c, bs),

over the DDTREE budgets of a measured step-cost table (``benchmark/ddtree/step_cost.py`` output:
ms per step per configuration and concurrency) and the chain (its ``DDTREE-chain`` row: the
DDTREE step with top-k 1, i.e. the rank-0 candidate of every depth, as DFLASH drafts it, at
DFLASH's verify width). The chain is the fallback when a tree does not pay at the current batch
size: a tree is chosen over the chain only when its value is more than ``chain_margin`` (2%)
above the chain's. The table's rows come from separate engines, whose step times differ by up to
a few percent from engine to engine: a row of a tree can read cheaper than the chain's where it
is not. (A larger margin keeps the chain where a tree pays by less than it: at 4 requests on the
recorded traces budget 16 often beats the chain by 5-10%.) A budget is a
candidate only up to the largest concurrency the table measured it at (a sweep caps big budgets
where they do not fit; their cost beyond is unknown, not flat). (Costs are those of steps through
this worker: the ``DFLASH`` row is a different engine path and is not used.)

The expected accepted drafts come from the running acceptance profile (per candidate the mean
accepted drafts per request-step, each step weighted ``decay ** age`` and the sum divided by the
summed weights: :meth:`BudgetPolicy._update`), which the verified trees
give exactly for every smaller budget: DDTree trees are prefix-closed in best-first order (node
``i`` of a budget-``B`` tree is verify position ``i + 1``, and a node's position is larger than
its parent's), so the budget-``b`` tree is the first ``b`` nodes, and the path it would have
accepted is the leading part of the accepted path whose positions are ``<= b``. The chain's
acceptance comes from its own steps and, on a tree step, from ``core/shadow_chain.py`` (censored
steps count as the lower bound they are).

Evidence before choice: per-step acceptance is noisy (most steps accept 0 or 1 draft, a few
accept many), so an estimate from a handful of request-steps can rank the candidates wrongly,
and a candidate that is not chosen gets no new evidence. Hence:

- **Exploration.** While any candidate at the batch size has fewer than ``min_samples``
  request-steps recorded, the step verifies the largest candidate budget (it gives every smaller
  budget and, through the shadow chain, the chain); the step that completes it reads the
  profile back at once, so the first choice rests on all of them.
- **Refreshes.** Budgets larger than the one verified go stale. After ``refresh_every`` steps
  the policy verifies the next budget above its choice (the smallest tree when the choice is the
  chain) for ``refresh_samples`` request-steps in a row (a burst of ``ceil(refresh_samples / bs)``
  steps), so the profile follows the traffic: a step up that now pays becomes the choice, and the
  next refresh looks one further. While refreshes leave the choice as it was, the interval
  doubles, up to ``max_refresh_every``; a refresh that changes it resets the interval. A
  refresh whose step costs ``r`` times the choice's waits ``r`` intervals, so refreshes take
  about the same share of the time at every batch size.

Pure torch / python, no sglang import; the worker calls :meth:`BudgetPolicy.choose` before the
tree is built and :meth:`BudgetPolicy.record` after acceptance.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch

from .budget_choice import CHAIN, CHAIN_MARGIN, Choice, StepCostTable, best_choice, candidates_at

__all__ = ["CHAIN", "BudgetPolicy", "Choice", "StepCostTable", "best_choice"]


def fold_decayed_mean(num: Dict, den: Dict, key, value: float, weight: float, decay: float) -> float:
    """Fold ``weight`` observations of mean ``value`` into the decayed mean kept as ``num[key] /
    den[key]`` (the older ones weighted by ``decay ** weight``); returns the new mean."""
    w = decay ** weight
    num[key] = w * num.get(key, 0.0) + value * weight
    den[key] = w * den.get(key, 0.0) + weight
    return num[key] / den[key]


@dataclass
class BudgetPolicy:
    """Per-step choice among ``budgets`` (ascending) and, if ``chain``, the DFLASH chain."""

    table: StepCostTable
    decay: float = 0.99  # weight of an observation per request-step of age
    refresh_every: int = 64
    max_refresh_every: int = 1024
    # Request-steps a candidate's estimate needs before it is compared (exploration), and that
    # a refresh verifies the next budget up for (the module docstring).
    min_samples: int = 24
    refresh_samples: int = 16
    # Steps between read-backs of the device-side sums. On a GPU the read-back is an
    # asynchronous copy to pinned memory, folded in once its event has completed (the profile
    # lags by about 2 x flush_every steps): a host sync in the worker would stall the overlap
    # scheduler's next launch. It reads at once only while a candidate has no estimate and on
    # the step that completes the exploration.
    flush_every: int = 8
    # A tree must beat the chain's tokens per ms by more than this share (see the module docstring).
    chain_margin: float = CHAIN_MARGIN
    budgets: List[int] = field(default_factory=list)
    chain: bool = True
    steps: int = 0
    _mean: Dict[Choice, float] = field(default_factory=dict)
    _num: Dict[Choice, float] = field(default_factory=dict)  # decayed sum of accepted drafts
    _den: Dict[Choice, float] = field(default_factory=dict)  # decayed count of request-steps
    _seen: Dict[Choice, int] = field(default_factory=dict)  # request-steps folded in (undecayed)
    _burst: Optional[Choice] = None  # the budget a refresh burst verifies
    _burst_left: int = 0  # request-steps that burst still verifies
    _sums: Optional[torch.Tensor] = None  # [candidates] accepted drafts since the last read-back (device)
    _counts: List[int] = field(default_factory=list)  # request-steps behind each sum (host-known)
    _budgets_dev: Optional[torch.Tensor] = None
    _pending: int = 0
    _interval: int = 0  # steps between refreshes now (refresh_every .. max_refresh_every)
    _last_refresh: int = 0  # the last step that explored or started a refresh
    _judge_at: Optional[int] = None  # the step that judges the last refresh (its data read back)
    _before: Optional[Choice] = None  # the choice before that refresh
    # An asynchronous read-back in flight: (host sums, counts behind them, "is it done?", wait).
    _inflight: Optional[tuple] = None

    def __post_init__(self):
        self._interval = self.refresh_every
        self.budgets = sorted(self.budgets or self.table.budgets())
        if not self.budgets:
            raise ValueError("the step-cost table has no DDTREE-<budget> rows")
        self.chain = self.chain and self.table.has_chain()

    def candidates(self) -> List[Choice]:
        return ([CHAIN] if self.chain else []) + list(self.budgets)

    def candidates_at(self, bs: int) -> List[Choice]:
        """:func:`budget_choice.candidates_at` for this policy's budgets and chain."""
        return candidates_at(self.table, self.budgets, self.chain, bs)

    def expected(self, choice: Choice) -> Optional[float]:
        """Running mean of accepted drafts per request-step (None: never observed)."""
        return self._mean.get(choice)

    def folded(self, choice: Choice) -> int:
        """Request-steps folded into ``choice``'s estimate so far (0: never observed)."""
        return self._seen.get(choice, 0)

    def recorded(self, choice: Choice) -> int:
        """Request-steps recorded for ``choice`` so far: folded in, or behind the device sums
        (pending or in a read-back in flight)."""
        if choice not in self.candidates():
            return self.folded(choice)
        i = self.candidates().index(choice)
        pending = self._counts[i] if self._counts else 0
        inflight = self._inflight[1][i] if self._inflight is not None else 0
        return self.folded(choice) + pending + inflight

    def _explored(self, cands) -> bool:
        """Every candidate has ``min_samples`` request-steps recorded (host-known: exploration
        stops without waiting for a read-back)."""
        return all(self.recorded(c) >= self.min_samples for c in cands)

    def choose(self, bs: int) -> Choice:
        """The candidate with the most expected tokens per ms at batch size ``bs`` (among
        :meth:`candidates_at`); the largest budget of those while any of them has fewer than
        ``min_samples`` request-steps recorded, and the next budget above the choice
        in a refresh burst once per interval (the module docstring)."""
        self.steps += 1
        cands = self.candidates_at(bs)
        trees = [c for c in cands if c != CHAIN]
        if not trees:  # no budget measured at this many requests: the chain, nothing to explore
            return CHAIN
        if not self._explored(cands):
            self._last_refresh = self.steps
            return max(trees)
        if self._burst is not None:
            if self._burst in trees and self._burst_left > 0:
                return self._burst_step(bs)
            self._burst = None  # a batch size that does not allow it: the burst ends here
        best = best_choice(self.table, self._mean, bs, cands, self.chain_margin)
        if self._judge_at is not None and self.steps >= self._judge_at:
            same = best == self._before
            self._interval = min(2 * self._interval, self.max_refresh_every) if same else self.refresh_every
            self._judge_at = None
        # Every step keeps the estimates of the budgets up to the verified one current; only
        # larger ones go stale. The refresh verifies the next budget above the choice, not the
        # largest (whose step can cost several chain steps at high concurrency), and waits the
        # interval times its step's cost over the choice's (a refresh takes about the same share
        # of the time at every batch size). If the next one up now pays, it becomes the choice and
        # the next refresh (the interval reset) looks one further. Nothing above: no refresh.
        larger = [b for b in trees if best == CHAIN or b > best]
        if larger and self._judge_at is None and \
                self.steps - self._last_refresh >= self._interval * self._cost_ratio(min(larger), best, bs):
            self._last_refresh = self.steps
            self._before, self._burst, self._burst_left = best, min(larger), self.refresh_samples
            return self._burst_step(bs)
        return best

    def _burst_step(self, bs: int) -> Choice:
        """A step of the refresh burst: ``bs`` of its request-steps verified; after its last one the
        refresh is judged once that step's data has been read back."""
        self._burst_left -= bs
        if self._burst_left <= 0:
            self._judge_at = self.steps + 2 * self.flush_every
        return self._burst

    def _cost_ratio(self, refresh: Choice, best: Choice, bs: int) -> float:
        """How many of the choice's steps one step of ``refresh`` costs at ``bs`` (at least 1)."""
        return max(1.0, self.table.cost(refresh, bs) / self.table.cost(best, bs))

    def record(self, verified: Choice, accepted: torch.Tensor, accept_len: torch.Tensor,
               chain_accept: Optional[torch.Tensor] = None) -> None:
        """Update the profile from one step (device tensors; read back every ``flush_every``
        steps). ``accepted [bs, P]`` verify positions of the accepted path (root first, -1
        padded), ``accept_len [bs]``; ``chain_accept [bs]`` what the chain would have accepted
        (shadow_chain), when known. The torch form of what ``kernels.tree_cuda.step_stats`` adds
        between :meth:`begin_record` and :meth:`end_record`."""
        bs = accepted.shape[0]
        if bs == 0:
            return
        sums, budgets, off, chain_sum = self.begin_record(verified, bs, accepted.device, chain_accept is not None)
        if chain_sum == 1:  # a chain step: the chain's own acceptance (it says nothing about trees)
            sums[0] += accept_len.sum()
        else:
            t = torch.arange(accepted.shape[1], device=accepted.device).expand_as(accepted)
            on_path = (t >= 1) & (t <= accept_len.unsqueeze(1))
            # The budget-b tree holds positions 1..b: its accepted path is the leading part of
            # this one inside it (positions grow along a path). Only budgets <= the verified one.
            inside = on_path.unsqueeze(0) & (accepted.unsqueeze(0) <= budgets.view(-1, 1, 1))
            sums[off:off + budgets.shape[0]] += inside.sum((1, 2)).double()
            if chain_sum == 2:
                sums[0] += chain_accept.sum()
        self.end_record(bs)

    def begin_record(self, verified: Choice, bs: int, device, with_chain: bool) -> tuple:
        """The device sums a step of ``bs`` (> 0) requests that verified ``verified`` adds to,
        counted on the host now: ``(sums [candidates] f64, budgets [known] i64, off, chain_sum)``.
        ``sums[off + i]`` takes the accepted drafts inside ``budgets[i]`` (every budget up to the
        verified one); ``sums[0]`` the chain's: ``chain_sum`` 1 its accept length (a chain step),
        2 the shadow chain's (a tree step with ``with_chain``: the shadow was computed), 0 none.
        Follow with :meth:`end_record` once the sums are added."""
        if self._sums is None or self._sums.device != torch.device(device):
            self._sums = torch.zeros(len(self.candidates()), dtype=torch.float64, device=device)
            self._counts = [0] * len(self.candidates())
            self._budgets_dev = torch.tensor(self.budgets, dtype=torch.int64, device=device)
        if verified == CHAIN:
            self._counts[0] += bs
            return self._sums, self._budgets_dev[:0], 0, 1
        off = 1 if self.chain else 0
        known = sum(1 for b in self.budgets if b <= int(verified))
        for i in range(off, off + known):
            self._counts[i] += bs
        chain_sum = 2 if self.chain and with_chain else 0
        if chain_sum:
            self._counts[0] += bs
        return self._sums, self._budgets_dev[:known], off, chain_sum

    def end_record(self, bs: int) -> None:
        """After a step's sums were added (:meth:`begin_record`): read back when due."""
        self._pending += 1
        self._poll()
        # While a candidate has no estimate the policy keeps verifying the largest budget (the
        # most expensive step): read back at once rather than after flush_every such steps. (Only
        # the candidates at this batch size: a budget never chosen at it would force a wait
        # on every step.)
        # The step that completes the exploration reads back at once too (once): the first choice
        # then rests on every explored request-step.
        cands = self.candidates_at(bs)
        if any(self.expected(c) is None for c in cands) or (
                self._explored(cands) and any(self.folded(c) < self.min_samples for c in cands)):
            self.flush()
        elif self._pending >= self.flush_every:
            self._start_readback()

    def flush(self) -> None:
        """Fold everything recorded so far into the host estimates (waits for the device)."""
        self._drain()
        if self._sums is None or not self._pending:
            return
        self._fold(self._sums, self._counts)
        self._sums.zero_()
        self._counts = [0] * len(self._counts)
        self._pending = 0

    def _start_readback(self) -> None:
        """Hand the current sums to the host without waiting (GPU: a copy to pinned memory and
        an event; CPU: at once) and start new sums."""
        self._drain()  # normally done long ago (flush_every steps)
        host, ready, wait = self._copy_to_host(self._sums)
        self._inflight = (host, self._counts, ready, wait)
        self._sums.zero_()  # ordered after the copy on the same stream
        self._counts = [0] * len(self._counts)
        self._pending = 0
        self._poll()

    @staticmethod
    def _copy_to_host(sums: torch.Tensor):
        """``(host tensor, ready(), wait())``: the asynchronous read-back of ``sums``."""
        if not sums.is_cuda:
            return sums.clone(), lambda: True, lambda: None
        host = torch.empty(sums.shape, dtype=sums.dtype, pin_memory=True)
        host.copy_(sums, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return host, done.query, done.synchronize

    def _poll(self) -> None:
        """Fold a completed read-back in (never waits)."""
        if self._inflight is not None and self._inflight[2]():
            self._fold(*self._inflight[:2])
            self._inflight = None

    def _drain(self) -> None:
        """Fold the read-back in flight in, waiting for it if needed."""
        if self._inflight is not None:
            self._inflight[3]()  # once waited for, it is ready: _poll folds it
            self._poll()

    def _fold(self, totals: torch.Tensor, counts: List[int]) -> None:
        for c, total, n in zip(self.candidates(), totals.tolist(), counts):
            if n > 0:
                self._update(c, total / n, n)

    def _update(self, c: Choice, value: float, weight: int) -> None:
        """Fold ``weight`` request-steps of mean ``value`` into ``c``'s estimate: the decayed mean
        ``sum decay^age x / sum decay^age`` over every request-step recorded for ``c`` (the
        older ones decayed by ``decay ** weight``), so each step counts alike at its age, the
        first one included."""
        self._mean[c] = fold_decayed_mean(self._num, self._den, c, value, weight, self.decay)
        self._seen[c] = self._seen.get(c, 0) + int(weight)

    def snapshot(self) -> dict:
        return {"steps": self.steps, "budgets": self.budgets, "chain": self.chain, "refresh_interval": self._interval,
                "expected_accepted": {str(k): round(v, 4) for k, v in self._mean.items()},
                "samples": {str(k): v for k, v in self._seen.items()}}


class PinnedChoice:
    """Benchmark-only (``SGLANG_DDTREE_BENCH_PIN``): the choice a file names for every step of a
    budget-auto engine, re-read when the file's modification time or size changes.

    The file holds one word: ``chain``, a budget among ``budgets``, or ``auto`` (no pin; also an
    absent or empty file). :meth:`get` returns the pinned :data:`Choice`, or None for the policy's
    own. Raises ValueError naming the file for any other content (on the step that reads it)."""

    def __init__(self, path: str, budgets, chain: bool):
        self.path = str(path)
        self.budgets = tuple(int(b) for b in budgets)
        self.chain = bool(chain)
        self._stamp = None
        self._choice: Optional[Choice] = None

    def parse(self, text: str) -> Optional[Choice]:
        word = text.strip()
        if word in ("", "auto"):
            return None
        if word == CHAIN:
            if not self.chain:
                raise ValueError(f"{self.path}: 'chain' pinned, but the step-cost table has no chain row")
            return CHAIN
        if word.isdigit() and int(word) in self.budgets:
            return int(word)
        raise ValueError(f"{self.path}: {word!r} is not 'auto', 'chain' or a budget of the table {list(self.budgets)}")

    def get(self) -> Optional[Choice]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._choice = None, None
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            with open(self.path) as f:
                self._choice = self.parse(f.read())
            self._stamp = stamp
        return self._choice
