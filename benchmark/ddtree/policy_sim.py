"""Budget auto offline: what ``--speculative-ddtree-budget auto`` (``core/budget_policy.py``,
:class:`BudgetPolicy`) chooses on recorded drafter traces (``core/traces.py``) and the tokens per
ms it serves, beside every fixed choice, at concurrency 1.

Requests are served one after another, in trace order, by one policy object that persists across
them (as in a server). Every decode step of a request at state ``p``: the policy chooses
(``choose(1)``); the step builds the chosen configuration's tree (a budget's tree, or
:data:`CHAIN`: top-1, budget = depth) from the trace's proposal at ``p`` and walks it, exactly as
``core/trace_sim.py`` does (:func:`trace_sim.step_trees`, :func:`trace_sim.trace_targets`,
:func:`accept.tree_walk`); the policy records what the worker records (``worker.py``): the
accepted path's verify positions, the accept length and, for a tree step, the shadow chain's
accept (``core/shadow_chain.py``, from the tree's ranks, the rank-0 proposals and the bonus);
the request moves on by ``min(a + 1, T - p)`` tokens; the step costs the table's ms for the
choice at 1 request. A fixed choice is the same loop with the choice pinned (no record, as a
pinned step of the engine).

Reported per trace and choice: tokens per step ``sum T / steps`` (sglang's accept length, the
prefill's token counted), ms per step, tokens per ms ``sum T / sum ms`` (the prefill not charged),
the ratio of tokens per ms to the best fixed choice's and, for auto, the steps per choice. The
row ``best fixed per request`` serves each request with the fixed choice cheapest for it (what a
per-request choice could reach). By default every request is served once, in trace order;
``--round-requests / --rounds / --warmup-requests`` serve ``replay_bench.py``'s order instead
(an untimed warm-up, then rounds cycling through the trace's first requests).

Exactness limits:

- Accept lengths are exact except on censored steps (the accepted path reaches the end of the
  output: a lower bound, ``trace_sim``'s module docstring); on those the shadow chain the policy
  records is also a lower bound where the engine may have counted one more token.
- Read-back timing: the policy folds its sums in every ``flush_every`` steps; on a CPU the fold
  is immediate, on a GPU it waits for an asynchronous copy (a step or more later), so the
  engine's profile may lag the simulated one by a step or so and a choice flip by as much.
- Step cost is the table's constant ms per choice: no per-step variance, no prefill, no host
  scheduling; greedy decoding only (the traces are greedy).

Policy variants (``--variant``): ``base`` (:class:`BudgetPolicy` with keyword overrides) and
``paired`` (:class:`PairedPolicy`, defined here: each budget above the smallest is estimated as
the smallest's level plus the mean gain over the next smaller budget on steps that verified
both).

    python benchmark/ddtree/policy_sim.py --trace benchmark/ddtree/traces/v2/humaneval.pt \\
        --costs chain=22.87 16=23.23 64=25.79 --decay 0.98 0.995 --variant paired base:refresh_every=32
    python benchmark/ddtree/policy_sim.py --trace T.pt --table step_cost.json \
        --round-requests 8 --rounds 2 --warmup-requests 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from sglang_ddtree.core import trace_sim  # noqa: E402
from sglang_ddtree.core.accept import tree_walk  # noqa: E402
from sglang_ddtree.core.budget_choice import CHAIN, Choice, StepCostTable  # noqa: E402
from sglang_ddtree.core.budget_policy import BudgetPolicy  # noqa: E402
from sglang_ddtree.core.shadow_chain import shadow_chain_accept  # noqa: E402
from sglang_ddtree.core.traces import RequestTrace, TraceSet  # noqa: E402

POLICY_KEYS = {"decay": float, "refresh_every": int, "max_refresh_every": int, "flush_every": int,
               "chain_margin": float, "gain_decay": float}


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
    """A served trace set: ``tokens`` (sum of output lengths T), ``steps``, ``ms``, steps per
    choice, and per request served (in order) the accepted drafts of every step (``drafts``)
    and its ms (``request_ms``)."""

    label: str
    tokens: int = 0
    steps: int = 0
    ms: float = 0.0
    choices: Dict[str, int] = field(default_factory=dict)
    drafts: List[List[int]] = field(default_factory=list)
    request_ms: List[float] = field(default_factory=list)

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0

    @property
    def ms_per_step(self) -> float:
        return self.ms / self.steps if self.steps else 0.0

    @property
    def tokens_per_ms(self) -> float:
        return self.tokens / self.ms if self.ms else 0.0


def serve(cache: OutcomeCache, table: StepCostTable, policy: Optional[BudgetPolicy] = None,
          pin: Optional[Choice] = None, label: str = "", order: Optional[Sequence[int]] = None,
          untimed: int = 0) -> RunResult:
    """Serve the requests of ``cache`` one after another at concurrency 1 (module docstring),
    ``order`` (request indices; default all, in order): each step chooses with ``policy``
    (persisting across requests) and records into it, or verifies ``pin`` (no record). Exactly one
    of ``policy`` and ``pin``. The first ``untimed`` requests of ``order`` are served (the policy
    learns from them) but not counted in the result."""
    if (policy is None) == (pin is None):
        raise ValueError("serve: give a policy or a pinned choice, not both")
    res = RunResult(label=label or (str(pin) if pin is not None else "auto"))
    record_chain = policy is not None and policy.chain
    order = range(len(cache.requests)) if order is None else order
    for n, i in enumerate(order):
        t = cache.requests[i]
        if n == untimed:
            res = RunResult(label=res.label)
        T = int(t.output.shape[0])
        res.tokens += T
        drafts: List[int] = []
        ms0 = res.ms
        p = 1
        while p < T:
            choice = pin if pin is not None else policy.choose(1)
            o = cache.get(i, choice)
            a = int(o.accept_len[p - 1])
            if policy is not None:
                chain = None if choice == CHAIN or not record_chain else o.chain_accept[p - 1:p]
                policy.record(choice, o.accepted[p - 1:p], o.accept_len[p - 1:p], chain_accept=chain)
            drafts.append(a)
            res.steps += 1
            res.ms += table.cost(choice, 1)
            res.choices[str(choice)] = res.choices.get(str(choice), 0) + 1
            p += min(a + 1, T - p)
        res.drafts.append(drafts)
        res.request_ms.append(res.ms - ms0)
    return res


def best_per_request(fixed: Sequence[RunResult]) -> RunResult:
    """The reference a per-request choice could reach: every request served by the fixed choice
    that serves it in the fewest ms (``choices`` counts requests, not steps)."""
    out = RunResult(label="best fixed per request", tokens=fixed[0].tokens)
    for i in range(len(fixed[0].request_ms)):
        r = min(fixed, key=lambda f: f.request_ms[i])
        out.ms += r.request_ms[i]
        out.steps += len(r.drafts[i])
        out.drafts.append(r.drafts[i])
        out.request_ms.append(r.request_ms[i])
        out.choices[r.label] = out.choices.get(r.label, 0) + 1
    return out


# ----------------------------------------------------------------------------- policy variants

class PairedPolicy(BudgetPolicy):
    """:class:`BudgetPolicy` whose budget estimates are paired: the smallest budget's level from
    every tree step, and each larger budget ``b_i`` as the level plus the gains
    ``E[a(b_j) - a(b_{j-1})]``, ``j <= i``, each from the steps that verified ``b_j`` (which give
    both accepts of the pair). The chain's level is the base policy's (its own steps and the
    shadow chain). Levels decay by ``decay`` per request-step, gains by ``gain_decay`` per step
    that observed them; both are decayed means normalised by their weight (as
    :meth:`BudgetPolicy._update`). Estimates fold in at every record (no read-back lag)."""

    gain_decay: Optional[float] = None

    def __init__(self, *args, gain_decay: Optional[float] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.gain_decay = self.decay if gain_decay is None else float(gain_decay)
        self._acc: Dict[object, List[float]] = {}  # key -> [weighted sum, weight]

    def _add(self, key, value: float, decay: float) -> float:
        s = self._acc.setdefault(key, [0.0, 0.0])
        s[0] = decay * s[0] + value
        s[1] = decay * s[1] + 1.0
        return s[0] / s[1]

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
        s = self._acc["level"]
        value = s[0] / s[1]
        self._mean[self.budgets[0]] = value
        for x in self.budgets[1:]:
            g = self._acc.get(("gain", x))
            if g is None:
                break
            value += g[0] / g[1]
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

def table_from_costs(costs: Sequence[str], concurrency: int = 1) -> StepCostTable:
    """``["chain=22.87", "16=23.23", ...]`` -> a table with those ms per step at ``concurrency``."""
    ms: Dict[str, Dict[int, float]] = {}
    for item in costs:
        k, sep, v = item.partition("=")
        if not sep or not (k == CHAIN or k.isdigit()):
            raise ValueError(f"--costs: {item!r} is not chain=MS or BUDGET=MS")
        ms[f"DDTREE-{k}"] = {concurrency: float(v)}
    return StepCostTable(ms)


def fixed_choices(table: StepCostTable) -> List[Choice]:
    """The table's choices at 1 request: the chain (if it has a row), then the budgets."""
    return ([CHAIN] if table.has_chain() else []) + table.budgets()


def replay_order(n_requests: int, round_requests: Optional[int] = None, rounds: int = 1,
                 warmup_requests: int = 0) -> Tuple[List[int], int]:
    """``(order, untimed)`` as ``replay_bench.py`` sends requests at concurrency 1: a warm-up of
    ``warmup_requests``, then ``rounds`` rounds of ``round_requests`` (default: all), trace
    requests ``0, 1, ..., R - 1, 0, 1, ...`` in each; the warm-up is untimed."""
    per = n_requests if round_requests is None else int(round_requests)
    cyc = lambda k: [j % n_requests for j in range(k)]  # noqa: E731
    return cyc(warmup_requests) + cyc(per) * rounds, warmup_requests


def evaluate(requests: Sequence[RequestTrace], table: StepCostTable,
             autos: Sequence[Tuple[str, Callable[..., BudgetPolicy], Dict[str, object]]],
             order: Optional[Sequence[int]] = None, untimed: int = 0) -> dict:
    """Every fixed choice of ``table`` and every auto ``(label, class, overrides)`` on ``requests``
    (served as :func:`serve`'s ``order`` / ``untimed``):
    ``{"fixed": [RunResult], "auto": [RunResult], "best_fixed": RunResult, "per_request":
    RunResult}`` (:func:`best_per_request`)."""
    cache = OutcomeCache(requests)
    fixed = [serve(cache, table, pin=c, order=order, untimed=untimed) for c in fixed_choices(table)]
    auto = [serve(cache, table, policy=cls(table=table, **kw), label=label, order=order, untimed=untimed)
            for label, cls, kw in autos]
    return {"fixed": fixed, "auto": auto, "best_fixed": max(fixed, key=lambda r: r.tokens_per_ms),
            "per_request": best_per_request(fixed)}


def report(name: str, out: dict) -> str:
    best = out["best_fixed"]
    lines = [f"== {name}", f"{'choice':<34} {'tok/step':>8} {'ms/step':>8} {'tok/ms':>8} {'/best':>6}  choices"]
    for r in out["fixed"] + [out["per_request"]] + out["auto"]:
        ch = "" if r in out["fixed"] else " ".join(f"{k}:{v}" for k, v in r.choices.items())
        ch += " (requests)" if r is out["per_request"] else ""
        lines.append(f"{r.label:<34} {r.tokens_per_step:8.4f} {r.ms_per_step:8.3f} {r.tokens_per_ms:8.5f} "
                     f"{r.tokens_per_ms / best.tokens_per_ms:6.4f}  {ch}")
    return "\n".join(lines)


def to_json(out: dict) -> dict:
    row = lambda r: {"label": r.label, "tokens": r.tokens, "steps": r.steps, "ms": r.ms,  # noqa: E731
                     "tokens_per_step": r.tokens_per_step, "ms_per_step": r.ms_per_step,
                     "tokens_per_ms": r.tokens_per_ms, "choices": r.choices}
    return {"fixed": [row(r) for r in out["fixed"]], "auto": [row(r) for r in out["auto"]],
            "best_fixed": out["best_fixed"].label, "per_request": row(out["per_request"])}


def main(argv: Optional[Sequence[str]] = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", nargs="+", required=True, help="trace files (core/traces.py)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--costs", nargs="+", help="ms per step at 1 request: chain=MS BUDGET=MS ...")
    src.add_argument("--table", help="step_cost.py JSON (rows: config, concurrency, ms_per_step)")
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

    table = table_from_costs(args.costs) if args.costs else StepCostTable.from_json(args.table)
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
        order, untimed = replay_order(len(ts.requests), args.round_requests, args.rounds, args.warmup_requests)
        out = evaluate(ts.requests, table, autos, order, untimed)
        print(report(f"{path} ({len(ts.requests)} requests, {ts.positions} positions)", out), flush=True)
        results[path] = to_json(out)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
