"""Budget auto offline: what ``--speculative-ddtree-budget auto`` (``core/budget_policy.py``,
:class:`BudgetPolicy`) chooses on recorded drafter traces (``core/traces.py``) and the tokens per
ms it serves, beside every fixed choice, at one or several concurrencies (``--concurrency``).

Requests are served by one policy object that persists across them (as in a server), in trace
order, ``N`` at a time in lockstep (``--concurrency N``, default 1: one after another): ``N``
slots and a queue; a slot whose request finished takes the next request of the order at the next
step; the run ends when the order is exhausted and every slot is empty. Each step the policy
chooses once for the batch (``choose(bs)``, ``bs`` the requests decoding in it); every active
request at its own state ``p`` takes its own step with that choice: the step builds the chosen configuration's tree (a budget's tree, or
:data:`CHAIN`: top-1, budget = depth) from the trace's proposal at ``p`` and walks it, exactly as
``core/trace_sim.py`` does (:func:`trace_sim.step_trees`, :func:`trace_sim.trace_targets`,
:func:`accept.tree_walk`); the policy records what the worker records (``worker.py``): the
accepted path's verify positions, the accept length and, for a tree step, the shadow chain's
accept (``core/shadow_chain.py``, from the tree's ranks, the rank-0 proposals and the bonus),
of all ``bs`` requests in one ``record`` call (rows stacked in slot order; ``chain_accept`` None
on a chain step); each request moves on by ``min(a + 1, T - p)`` tokens; the step costs
``table.cost(choice, bs)``. A fixed choice is the same loop with the choice pinned (no record,
as a pinned step of the engine); a fixed choice's per-request steps do not depend on batching.

Step costs: ``--table`` (``step_cost.py`` JSON, one or several merged as ``replay_bench.py
--auto-table`` merges them: a later table's row in place of an earlier one's for the same
configuration and concurrency) gives ms per configuration and concurrency,
:meth:`StepCostTable.cost`: linear between measured concurrencies, flat outside them. A budget
is a candidate (and a fixed row) at ``bs`` only if the table measured it at ``bs`` requests or
more (:func:`budget_choice.candidates_at`; with no budget left, the chain). ``--costs
chain=MS BUDGET=MS ...`` gives one ms per choice, the same at every batch size (every budget a
candidate at every concurrency asked for); per-concurrency costs need ``--table``.

Reported per trace, concurrency and choice: tokens per request-step ``sum T / sum request
steps`` (sglang's accept length, the prefill's token counted), ms per (batch) step, tokens per ms
``sum T / sum ms`` (the prefill not charged), tokens per s per request (the mean over requests of
``T / wall ms``, a request's wall ms the summed ms of the steps it took part in:
``replay_bench.py``'s ``tok_s_per_request`` without prefill or queueing), the ratio of tokens per
ms to the best fixed choice's and, for auto, the batch steps per choice. At concurrency 1 only,
the row ``best fixed per request`` serves each request with the fixed choice cheapest for it
(what a per-request choice could reach). By default every request is served once, in trace
order; ``--round-requests / --rounds / --warmup-requests`` serve ``replay_bench.py``'s order
instead (an untimed warm-up, then rounds cycling through the trace's first requests, each at
least one batch of ``--concurrency`` requests, :func:`replay_order`); the warm-up is served to
its end before the timed requests start, and the timed rounds form one queue (no barrier between
rounds).

Exactness limits:

- Accept lengths are exact except on censored steps (the accepted path reaches the end of the
  output: a lower bound, ``trace_sim``'s module docstring); on those the shadow chain the policy
  records is also a lower bound where the engine may have counted one more token.
- Read-back timing: the policy folds its sums in every ``flush_every`` steps; on a CPU the fold
  is immediate, on a GPU it waits for an asynchronous copy (a step or more later), so the
  engine's profile may lag the simulated one by a step or so and a choice flip by as much.
- Step cost is the table's ms per choice and batch size (interpolated between measured
  concurrencies): no per-step variance, no prefill, no host scheduling, no dependence on the
  requests' context lengths; greedy decoding only (the traces are greedy).

Policy variants (``--variant``): ``base`` (:class:`BudgetPolicy` with keyword overrides) and
``paired`` (:class:`PairedPolicy`, defined here: each budget above the smallest is estimated as
the smallest's level plus the mean gain over the next smaller budget on steps that verified
both).

    python benchmark/ddtree/policy_sim.py --trace benchmark/ddtree/traces/v2/humaneval.pt \\
        --costs chain=22.87 16=23.23 64=25.79 --decay 0.98 0.995 --variant paired base:refresh_every=32
    python benchmark/ddtree/policy_sim.py --trace T.pt --table step_cost.json \
        --round-requests 8 --rounds 2 --warmup-requests 4 --json out.json
    python benchmark/ddtree/policy_sim.py --trace T.pt --table a/step_cost.json b/step_cost.json \
        --concurrency 1 4 16

``--json``: per trace path (concurrency 1) or ``PATH@N`` (concurrency N > 1) the rows of
:func:`to_json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from sglang_ddtree.core import trace_sim  # noqa: E402
from sglang_ddtree.core.accept import tree_walk  # noqa: E402
from sglang_ddtree.core.budget_choice import CHAIN, Choice, StepCostTable, candidates_at  # noqa: E402
from sglang_ddtree.core.budget_policy import BudgetPolicy, fold_decayed_mean  # noqa: E402
from sglang_ddtree.core.shadow_chain import shadow_chain_accept  # noqa: E402
from sglang_ddtree.core.traces import RequestTrace, TraceSet  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_cost  # noqa: E402

POLICY_KEYS = {"decay": float, "refresh_every": int, "max_refresh_every": int, "flush_every": int,
               "chain_margin": float, "min_samples": int, "refresh_samples": int, "gain_decay": float}


# ----------------------------------------------------------------------------- step outcomes

@dataclass
class Outcomes:
    """One request's step outcome at every state ``p = 1 .. T - 1`` (row ``p - 1``) for one
    choice: ``accepted [T - 1, L + 1]`` verify positions of the accepted path (root first, -1
    padded), ``accept_len [T - 1]``, ``chain_accept [T - 1]`` the shadow chain's accept (what
    the worker computes on a tree step; the chain's own accept for :data:`CHAIN`) and
    ``chain_censored [T - 1]`` where that is the shadow's lower bound (never for :data:`CHAIN`)."""

    accepted: torch.Tensor
    accept_len: torch.Tensor
    chain_accept: torch.Tensor
    chain_censored: torch.Tensor


def sim_config(choice: Choice) -> trace_sim.SimConfig:
    """The worker's configuration of a policy choice: :data:`trace_sim.CHAIN` for the chain,
    a budget tree (the trace's top-K, its depth) otherwise."""
    return trace_sim.CHAIN if choice == CHAIN else trace_sim.SimConfig(budget=int(choice))


def request_outcomes(t: RequestTrace, choice: Choice) -> Outcomes:
    """:class:`Outcomes` of ``choice`` on every state of ``t`` (batched over the states; each
    step depends on its own state only)."""
    T = int(t.output.shape[0])
    states = list(range(1, T))
    L = t.depth
    if not states:
        empty = torch.zeros(0, dtype=torch.long)
        return Outcomes(torch.zeros(0, L + 1, dtype=torch.long), empty, empty, empty.bool())
    n = len(states)
    tree, layout, L = trace_sim.step_trees([t] * n, states, sim_config(choice))
    p = torch.tensor(states, dtype=torch.long)
    outputs = t.output.long().unsqueeze(0).expand(n, T)
    lengths = torch.full((n,), T, dtype=torch.long)
    target = trace_sim.trace_targets(outputs, lengths, p, layout.depth)
    acc = tree_walk(layout.tokens, layout.parent, layout.depth, target, L)
    if choice == CHAIN:
        chain, censored = acc.accept_len.clone(), torch.zeros(n, dtype=torch.bool)
    else:
        node_rank = torch.cat([torch.zeros_like(tree.rank[:, :1]), tree.rank], 1)
        bonus = target.gather(1, acc.accepted.gather(1, acc.accept_len.unsqueeze(1))).squeeze(1)
        chain_tokens = t.topk_ids[p][:, :, 0].long()
        chain, censored = shadow_chain_accept(acc.accepted, acc.accept_len, node_rank, chain_tokens, bonus, L)
    return Outcomes(acc.accepted, acc.accept_len, chain, censored)


class OutcomeCache:
    """:func:`request_outcomes` per (request index, choice), computed once per trace set."""

    def __init__(self, requests: Sequence[RequestTrace]):
        self.requests = list(requests)
        self._cache: Dict[Tuple[int, Choice], Outcomes] = {}

    def get(self, i: int, choice: Choice) -> Outcomes:
        key = (i, choice)
        if key not in self._cache:
            self._cache[key] = request_outcomes(self.requests[i], choice)
        return self._cache[key]


# ----------------------------------------------------------------------------- the serving loop

@dataclass
class RunResult:
    """A served trace set: ``tokens`` (sum of output lengths T), ``steps`` (batch steps),
    ``request_steps`` (steps summed over requests), ``ms``, batch steps per choice, and per
    request served (in ``order``'s order) the accepted drafts of every step (``drafts``), its
    wall ms (``request_ms``: the ms of the steps it took part in) and its ``T``
    (``request_tokens``)."""

    label: str
    tokens: int = 0
    steps: int = 0
    ms: float = 0.0
    choices: Dict[str, int] = field(default_factory=dict)
    drafts: List[List[int]] = field(default_factory=list)
    request_ms: List[float] = field(default_factory=list)
    request_steps: int = 0
    request_tokens: List[int] = field(default_factory=list)

    @property
    def tokens_per_step(self) -> float:
        """Tokens per request-step (sglang's accept length)."""
        return self.tokens / self.request_steps if self.request_steps else 0.0

    @property
    def ms_per_step(self) -> float:
        return self.ms / self.steps if self.steps else 0.0

    @property
    def tokens_per_ms(self) -> float:
        return self.tokens / self.ms if self.ms else 0.0

    @property
    def tok_s_per_request(self) -> float:
        """Mean over requests of ``T / wall ms`` in tokens per s (requests of 0 ms left out)."""
        rates = [1000.0 * t / m for t, m in zip(self.request_tokens, self.request_ms) if m > 0]
        return sum(rates) / len(rates) if rates else 0.0


def _stack(rows: Sequence[torch.Tensor], fill: int) -> torch.Tensor:
    """Rows ``[1, W_i]`` -> ``[n, max W_i]``, right-padded with ``fill``."""
    width = max(r.shape[1] for r in rows)
    if all(r.shape[1] == width for r in rows):
        return torch.cat(list(rows), 0)
    out = torch.full((len(rows), width), fill, dtype=rows[0].dtype)
    for j, r in enumerate(rows):
        out[j, : r.shape[1]] = r[0]
    return out


@dataclass
class _Slot:
    """A request decoding in a slot: its position in the order, request index, output length
    ``T``, state ``p``, accepted drafts per step so far and the run's ms when it started."""

    pos: int
    req: int
    T: int
    p: int = 1
    drafts: List[int] = field(default_factory=list)
    ms0: float = 0.0


def _serve_phase(cache: OutcomeCache, table: StepCostTable, policy: Optional[BudgetPolicy],
                 pin: Optional[Choice], order: Sequence[int], concurrency: int, res: RunResult) -> None:
    """Serve ``order`` into ``res``, ``concurrency`` slots in lockstep (module docstring)."""
    record_chain = policy is not None and policy.chain
    queue = list(enumerate(order))[::-1]  # (position in order, request index); pop() takes the next
    slots: List[Optional[_Slot]] = [None] * concurrency
    done: Dict[int, _Slot] = {}  # by position in the order; ms0 then holds the request's ms

    def finish(sl: _Slot) -> None:
        sl.ms0 = res.ms - sl.ms0
        done[sl.pos] = sl

    while True:
        for k in range(concurrency):
            while slots[k] is None and queue:
                n, i = queue.pop()
                sl = _Slot(n, i, int(cache.requests[i].output.shape[0]), ms0=res.ms)
                res.tokens += sl.T
                if sl.T > 1:
                    slots[k] = sl
                else:
                    finish(sl)  # nothing to decode
        live = [(k, sl) for k, sl in enumerate(slots) if sl is not None]
        if not live:
            break
        bs = len(live)
        choice = pin if pin is not None else policy.choose(bs)
        outs = [cache.get(sl.req, choice) for _, sl in live]
        if policy is not None:
            def rows(name: str) -> List[torch.Tensor]:
                return [getattr(o, name)[sl.p - 1:sl.p] for (_, sl), o in zip(live, outs)]
            chain = None if choice == CHAIN or not record_chain else torch.cat(rows("chain_accept"))
            policy.record(choice, _stack(rows("accepted"), -1), torch.cat(rows("accept_len")), chain_accept=chain)
        res.steps += 1
        res.request_steps += bs
        res.ms += table.cost(choice, bs)
        res.choices[str(choice)] = res.choices.get(str(choice), 0) + 1
        for (k, sl), o in zip(live, outs):
            a = int(o.accept_len[sl.p - 1])
            sl.drafts.append(a)
            sl.p += min(a + 1, sl.T - sl.p)
            if sl.p >= sl.T:
                finish(sl)
                slots[k] = None
    for n in sorted(done):
        res.drafts.append(done[n].drafts)
        res.request_ms.append(done[n].ms0)
        res.request_tokens.append(done[n].T)


def serve(cache: OutcomeCache, table: StepCostTable, policy: Optional[BudgetPolicy] = None,
          pin: Optional[Choice] = None, label: str = "", order: Optional[Sequence[int]] = None,
          untimed: int = 0, concurrency: int = 1) -> RunResult:
    """Serve the requests of ``cache`` at ``concurrency`` (module docstring; 1: one after
    another), ``order`` (request indices; default all, in order): each step chooses with
    ``policy`` (persisting across requests) and records into it, or verifies ``pin`` (no record).
    Exactly one of ``policy`` and ``pin``. The first ``untimed`` requests of ``order`` are served
    to their end first (the policy learns from them) but not counted in the result. Per-request
    lists follow ``order``."""
    if (policy is None) == (pin is None):
        raise ValueError("serve: give a policy or a pinned choice, not both")
    if concurrency < 1:
        raise ValueError(f"serve: concurrency {concurrency} < 1")
    label = label or (str(pin) if pin is not None else "auto")
    order = list(range(len(cache.requests)) if order is None else order)
    if untimed:
        _serve_phase(cache, table, policy, pin, order[:untimed], concurrency, RunResult(label=label))
    res = RunResult(label=label)
    _serve_phase(cache, table, policy, pin, order[untimed:], concurrency, res)
    return res


def best_per_request(fixed: Sequence[RunResult]) -> RunResult:
    """The reference a per-request choice could reach: every request served by the fixed choice
    that serves it in the fewest ms (``choices`` counts requests, not steps)."""
    out = RunResult(label="best fixed per request", tokens=fixed[0].tokens)
    for i in range(len(fixed[0].request_ms)):
        r = min(fixed, key=lambda f: f.request_ms[i])
        out.ms += r.request_ms[i]
        out.steps += len(r.drafts[i])
        out.request_steps += len(r.drafts[i])
        out.drafts.append(r.drafts[i])
        out.request_ms.append(r.request_ms[i])
        out.request_tokens.append(r.request_tokens[i])
        out.choices[r.label] = out.choices.get(r.label, 0) + 1
    return out


# ----------------------------------------------------------------------------- policy variants

class PairedPolicy(BudgetPolicy):
    """:class:`BudgetPolicy` whose budget estimates are paired: the smallest budget's level from
    every tree step, and each larger budget ``b_i`` as the level plus the gains
    ``E[a(b_j) - a(b_{j-1})]``, ``j <= i``, each from the steps that verified ``b_j`` (which give
    both accepts of the pair). The chain's level is the base policy's (its own steps and the
    shadow chain). Levels decay by ``decay`` per request-step, gains by ``gain_decay`` per step
    that observed them; both are decayed means normalised by their weight
    (:func:`budget_policy.fold_decayed_mean`, as the base policy's). Estimates fold in at every record (no read-back lag)."""

    gain_decay: Optional[float] = None

    def __init__(self, *args, gain_decay: Optional[float] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.gain_decay = self.decay if gain_decay is None else float(gain_decay)
        self._acc_num: Dict[object, float] = {}  # key ("level", ("gain", b), CHAIN) -> decayed sum
        self._acc_den: Dict[object, float] = {}  # key -> decayed weight
        self._acc: Dict[object, float] = {}  # key -> decayed mean

    def _add(self, key, value: float, decay: float) -> float:
        self._acc[key] = fold_decayed_mean(self._acc_num, self._acc_den, key, value, 1, decay)
        return self._acc[key]

    def record(self, verified: Choice, accepted: torch.Tensor, accept_len: torch.Tensor,
               chain_accept: Optional[torch.Tensor] = None) -> None:
        for b in range(accepted.shape[0]):
            a = int(accept_len[b])
            path = [int(x) for x in accepted[b, 1:a + 1]]
            if verified == CHAIN:
                self._mean[CHAIN] = self._add(CHAIN, float(a), self.decay)
                continue
            if self.chain and chain_accept is not None:
                self._mean[CHAIN] = self._add(CHAIN, float(chain_accept[b]), self.decay)
            known = [x for x in self.budgets if x <= int(verified)]
            per = [sum(1 for pos in path if pos <= x) for x in known]  # positions grow along a path
            self._add("level", float(per[0]), self.decay)
            for j in range(1, len(known)):
                self._add(("gain", known[j]), float(per[j] - per[j - 1]), self.gain_decay)
        self._derive()

    def _derive(self) -> None:
        if "level" not in self._acc:
            return
        value = self._acc["level"]
        self._mean[self.budgets[0]] = value
        for x in self.budgets[1:]:
            g = self._acc.get(("gain", x))
            if g is None:
                break
            value += g
            self._mean[x] = value

    def flush(self) -> None:
        pass


VARIANTS: Dict[str, Callable[..., BudgetPolicy]] = {
    "base": BudgetPolicy, "paired": PairedPolicy}


def parse_variant(spec: str) -> Tuple[str, Callable[..., BudgetPolicy], Dict[str, object]]:
    """``NAME[:key=value,...]`` -> ``(label, policy class, keyword overrides)``; ValueError for an
    unknown name or key (keys: :data:`POLICY_KEYS`; ``gain_decay`` for ``paired`` only)."""
    name, _, rest = spec.partition(":")
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})")
    kw: Dict[str, object] = {}
    for item in filter(None, rest.split(",")):
        k, _, v = item.partition("=")
        if k not in POLICY_KEYS or (k == "gain_decay" and name != "paired"):
            raise ValueError(f"variant {spec!r}: unknown key {k!r}")
        kw[k] = POLICY_KEYS[k](v)
    return spec, VARIANTS[name], kw


# ----------------------------------------------------------------------------- tables, report

def table_from_costs(costs: Sequence[str], concurrency: Union[int, Sequence[int]] = 1) -> StepCostTable:
    """``["chain=22.87", "16=23.23", ...]`` -> a table with those ms per step at every
    concurrency of ``concurrency`` (one or several): the same cost at every batch size up to the
    largest (:meth:`StepCostTable.cost` is flat outside the measured ones)."""
    levels = [concurrency] if isinstance(concurrency, int) else list(concurrency)
    ms: Dict[str, Dict[int, float]] = {}
    for item in costs:
        k, sep, v = item.partition("=")
        if not sep or not (k == CHAIN or k.isdigit()):
            raise ValueError(f"--costs: {item!r} is not chain=MS or BUDGET=MS")
        ms[f"DDTREE-{k}"] = {int(c): float(v) for c in levels}
    return StepCostTable(ms)


def merged_table(paths: Sequence[Union[str, Path]]) -> StepCostTable:
    """``step_cost.py`` tables merged in order as ``replay_bench.py --auto-table`` merges them
    (:func:`step_cost.merge_rows`): a later table's row in place of an earlier one's for the
    same (configuration, concurrency)."""
    return StepCostTable.from_rows(step_cost.merge_rows([step_cost.table_rows(Path(p)) for p in paths]))


def fixed_choices(table: StepCostTable, concurrency: int = 1) -> List[Choice]:
    """The table's choices at ``concurrency`` requests: the chain (if it has a row), then the
    budgets measured at ``concurrency`` or more (:func:`budget_choice.candidates_at`)."""
    return candidates_at(table, table.budgets(), table.has_chain(), concurrency)


def replay_order(n_requests: int, round_requests: Optional[int] = None, rounds: int = 1,
                 warmup_requests: int = 0, concurrency: int = 1) -> Tuple[List[int], int]:
    """``(order, untimed)`` as ``replay_bench.py`` sends requests at ``concurrency``: a warm-up of
    ``warmup_requests`` (none if 0; else at least ``concurrency``), then ``rounds`` rounds of
    ``round_requests`` (default: all; at least ``concurrency``), trace requests ``0, 1, ...,
    R - 1, 0, 1, ...`` in each; the warm-up is untimed."""
    per = max(concurrency, n_requests if round_requests is None else int(round_requests))
    warm = max(concurrency, warmup_requests) if warmup_requests else 0
    cyc = lambda k: [j % n_requests for j in range(k)]  # noqa: E731
    return cyc(warm) + cyc(per) * rounds, warm


def evaluate(requests: Sequence[RequestTrace], table: StepCostTable,
             autos: Sequence[Tuple[str, Callable[..., BudgetPolicy], Dict[str, object]]],
             order: Optional[Sequence[int]] = None, untimed: int = 0, concurrency: int = 1,
             cache: Optional[OutcomeCache] = None) -> dict:
    """Every fixed choice of ``table`` at ``concurrency`` (:func:`fixed_choices`) and every auto
    ``(label, class, overrides)`` (a fresh policy each) on ``requests`` (served as :func:`serve`'s
    ``order`` / ``untimed`` / ``concurrency``; ``cache``: an :class:`OutcomeCache` of
    ``requests`` to reuse): ``{"concurrency": N, "fixed": [RunResult], "auto": [RunResult],
    "best_fixed": RunResult, "per_request": RunResult or None}`` (:func:`best_per_request`, at
    concurrency 1 only)."""
    cache = cache if cache is not None else OutcomeCache(requests)
    run = dict(order=order, untimed=untimed, concurrency=concurrency)
    fixed = [serve(cache, table, pin=c, **run) for c in fixed_choices(table, concurrency)]
    auto = [serve(cache, table, policy=cls(table=table, **kw), label=label, **run) for label, cls, kw in autos]
    return {"concurrency": concurrency, "fixed": fixed, "auto": auto,
            "best_fixed": max(fixed, key=lambda r: r.tokens_per_ms),
            "per_request": best_per_request(fixed) if concurrency == 1 else None}


def report(name: str, out: dict) -> str:
    best = out["best_fixed"]
    lines = [f"== {name}", f"{'choice':<34} {'tok/step':>8} {'ms/step':>8} {'tok/ms':>8} {'tok/s/req':>9} "
             f"{'/best':>6}  choices"]
    per = [out["per_request"]] if out.get("per_request") is not None else []
    for r in out["fixed"] + per + out["auto"]:
        ch = "" if r in out["fixed"] else " ".join(f"{k}:{v}" for k, v in r.choices.items())
        ch += " (requests)" if r in per else ""
        lines.append(f"{r.label:<34} {r.tokens_per_step:8.4f} {r.ms_per_step:8.3f} {r.tokens_per_ms:8.5f} "
                     f"{r.tok_s_per_request:9.2f} {r.tokens_per_ms / best.tokens_per_ms:6.4f}  {ch}")
    return "\n".join(lines)


def to_json(out: dict) -> dict:
    row = lambda r: {"label": r.label, "tokens": r.tokens, "steps": r.steps, "ms": r.ms,  # noqa: E731
                     "tokens_per_step": r.tokens_per_step, "ms_per_step": r.ms_per_step,
                     "tokens_per_ms": r.tokens_per_ms, "tok_s_per_request": r.tok_s_per_request,
                     "request_steps": r.request_steps, "choices": r.choices}
    per = out.get("per_request")
    return {"concurrency": out.get("concurrency", 1), "fixed": [row(r) for r in out["fixed"]],
            "auto": [row(r) for r in out["auto"]], "best_fixed": out["best_fixed"].label,
            "per_request": row(per) if per is not None else None}


def main(argv: Optional[Sequence[str]] = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", nargs="+", required=True, help="trace files (core/traces.py)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--costs", nargs="+",
                     help="ms per step, the same at every batch size: chain=MS BUDGET=MS ... "
                          "(per-concurrency costs: --table)")
    src.add_argument("--table", nargs="+",
                     help="step_cost.py JSON (rows: config, concurrency, ms_per_step); several are merged in "
                          "order, a later table's row in place of an earlier one's (as replay_bench.py "
                          "--auto-table); cost linear between measured concurrencies, flat outside; a budget "
                          "only at batch sizes up to the largest it was measured at")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1],
                    help="requests decoding in lockstep (N slots and a queue); one report per value")
    ap.add_argument("--decay", nargs="+", type=float, default=None,
                    help="one base-policy auto row per value (default: the policy's own)")
    ap.add_argument("--refresh-every", type=int)
    ap.add_argument("--max-refresh-every", type=int)
    ap.add_argument("--flush-every", type=int)
    ap.add_argument("--chain-margin", type=float)
    ap.add_argument("--variant", nargs="+", default=[],
                    help="extra auto rows NAME[:key=value,...], NAME in base, paired; keys "
                         + ", ".join(POLICY_KEYS) + " (the common overrides apply first)")
    ap.add_argument("--round-requests", type=int, help="requests per round (default: the trace's)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup-requests", type=int, default=0, help="served first, untimed")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    if any(n < 1 for n in args.concurrency):
        ap.error("--concurrency: values must be >= 1")
    table = (table_from_costs(args.costs, sorted({1, max(args.concurrency)})) if args.costs
             else merged_table(args.table))
    common = {k: v for k, v in (("refresh_every", args.refresh_every), ("max_refresh_every", args.max_refresh_every),
                                ("flush_every", args.flush_every), ("chain_margin", args.chain_margin))
              if v is not None}
    tag = ",".join(f"{k}={v}" for k, v in common.items())
    autos = []
    for d in (args.decay or [None]):
        kw = dict(common, **({} if d is None else {"decay": d}))
        autos.append(("auto" + (f"[{','.join(f'{k}={v}' for k, v in kw.items())}]" if kw else ""), BudgetPolicy, kw))
    for spec in args.variant:
        label, cls, kw = parse_variant(spec)
        autos.append((label + (f"[{tag}]" if tag else ""), cls, dict(common, **kw)))

    results = {}
    for path in args.trace:
        ts = TraceSet.load(path)
        cache = OutcomeCache(ts.requests)
        for n in args.concurrency:
            order, untimed = replay_order(len(ts.requests), args.round_requests, args.rounds, args.warmup_requests, n)
            out = evaluate(ts.requests, table, autos, order, untimed, concurrency=n, cache=cache)
            print(report(f"{path} ({len(ts.requests)} requests, {ts.positions} positions), concurrency {n}", out),
                  flush=True)
            results[path if n == 1 else f"{path}@{n}"] = to_json(out)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
