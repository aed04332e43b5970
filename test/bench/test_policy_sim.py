"""benchmark/ddtree/policy_sim.py: budget auto served offline on a recorded trace — pinned choices
reproduce core/trace_sim.simulate, a one-candidate table makes auto that fixed choice, the shadow
chain agrees with the chain where it is not censored, the variants' estimators give their
documented values; at concurrency 1 the lockstep loop is the sequential one exactly, at N > 1 a
pinned choice's per-request drafts do not change, and the batch size the policy sees never
exceeds N and drains as the queue empties."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))
import policy_sim as ps  # noqa: E402

from sglang_ddtree.core import trace_sim  # noqa: E402
from sglang_ddtree.core.budget_choice import CHAIN, StepCostTable  # noqa: E402
from sglang_ddtree.core.budget_policy import BudgetPolicy  # noqa: E402
from sglang_ddtree.core.traces import TraceSet  # noqa: E402

TRACE = ROOT / "benchmark" / "ddtree" / "traces" / "v2" / "humaneval.pt"
COSTS = ["chain=22.87", "16=23.23", "64=25.79"]


@pytest.fixture(scope="module")
def requests():
    return TraceSet.load(TRACE).requests[:6]


@pytest.fixture(scope="module")
def cache(requests):
    return ps.OutcomeCache(requests)


@pytest.mark.parametrize("choice", [CHAIN, 16, 64])
def test_pinned_choice_is_trace_sim(cache, requests, choice):
    table = ps.table_from_costs(COSTS)
    res = ps.serve(cache, table, pin=choice)
    sim = trace_sim.simulate(requests, ps.sim_config(choice))
    assert res.drafts == [r.drafts for r in sim]
    assert res.steps == sum(r.steps for r in sim)
    assert res.tokens_per_step == pytest.approx(trace_sim.tokens_per_step(sim), abs=0)
    assert res.ms == pytest.approx(res.steps * table.cost(choice, 1))
    assert res.choices == {str(choice): res.steps}


@pytest.mark.parametrize("costs,choice", [(["16=23.23"], 16), (["64=25.79"], 64)])
def test_one_budget_table_auto_is_fixed(cache, costs, choice):
    table = ps.table_from_costs(costs)
    fixed = ps.serve(cache, table, pin=choice)
    for cls in ps.VARIANTS.values():
        auto = ps.serve(cache, table, policy=cls(table=table))
        assert auto.drafts == fixed.drafts and auto.tokens == fixed.tokens
        assert auto.ms == fixed.ms and auto.choices == fixed.choices


def test_shadow_chain_is_the_chain_unless_censored(cache, requests):
    for i in range(len(requests)):
        chain = cache.get(i, CHAIN).accept_len
        for b in (16, 64):
            o = cache.get(i, b)
            assert torch.equal(o.chain_accept[~o.chain_censored], chain[~o.chain_censored])
            assert (o.chain_accept <= chain).all()


def test_auto_records_and_chooses(cache):
    table = ps.table_from_costs(COSTS)
    policy = BudgetPolicy(table=table)
    res = ps.serve(cache, table, policy=policy)
    assert sum(res.choices.values()) == res.steps == policy.steps
    assert set(res.choices) <= {"chain", "16", "64"}
    assert res.ms == pytest.approx(sum(n * table.cost(int(c) if c.isdigit() else c, 1) for c, n in res.choices.items()))
    assert {CHAIN, 16, 64} <= set(policy._mean)


def test_untimed_warmup_and_order(cache):
    table = ps.table_from_costs(COSTS)
    order, untimed = ps.replay_order(6, round_requests=2, rounds=2, warmup_requests=3)
    assert (order, untimed) == ([0, 1, 2, 0, 1, 0, 1], 3)
    # At 4 requests, as replay_bench.py sends them: a warm-up and rounds of at least 4 requests.
    assert ps.replay_order(6, round_requests=2, rounds=2, warmup_requests=3, concurrency=4) == (
        [0, 1, 2, 3] + [0, 1, 2, 3] * 2, 4)
    assert ps.replay_order(6, concurrency=4) == ([0, 1, 2, 3, 4, 5], 0)  # trace order: no warm-up
    res = ps.serve(cache, table, pin=16, order=order, untimed=untimed)
    once = ps.serve(cache, table, pin=16, order=[0, 1])
    assert res.drafts == once.drafts * 2 and res.tokens == 2 * once.tokens


def test_best_per_request_takes_the_cheapest(cache):
    table = ps.table_from_costs(COSTS)
    fixed = [ps.serve(cache, table, pin=c) for c in ps.fixed_choices(table)]
    best = ps.best_per_request(fixed)
    assert best.ms == pytest.approx(sum(min(f.request_ms[i] for f in fixed) for i in range(len(fixed[0].request_ms))))
    assert best.tokens_per_ms >= max(f.tokens_per_ms for f in fixed)


def _path(*positions, width=16):
    acc = torch.full((1, width), -1, dtype=torch.long)
    acc[0, : len(positions)] = torch.tensor(positions)
    return acc, torch.tensor([len(positions) - 1])


def test_paired_estimates_level_plus_gain():
    table = StepCostTable({"DDTREE-chain": {1: 1.0}, "DDTREE-2": {1: 1.0}, "DDTREE-4": {1: 1.0}})
    pol = ps.PairedPolicy(table=table, decay=0.5)
    assert pol.choose(1) == 4  # no estimate yet: the largest
    acc, a = _path(0, 1, 3)  # position 3 is outside the budget-2 tree
    pol.record(4, acc, a, chain_accept=torch.tensor([1]))
    assert (pol.expected(2), pol.expected(4), pol.expected(CHAIN)) == (1.0, 2.0, 1.0)
    acc, a = _path(0, 1, 2)  # a budget-2 step: the level only
    pol.record(2, acc, a, chain_accept=torch.tensor([0]))
    # level (0.5 * 1 + 2) / (0.5 + 1) = 5/3; gain of 4 over 2 still 1; chain (0.5 * 1 + 0) / 1.5
    assert pol.expected(2) == pytest.approx(5 / 3) and pol.expected(4) == pytest.approx(8 / 3)
    assert pol.expected(CHAIN) == pytest.approx(1 / 3)


def test_parse_variant():
    label, cls, kw = ps.parse_variant("paired:decay=0.99,gain_decay=0.9,refresh_every=16")
    assert cls is ps.PairedPolicy and kw == {"decay": 0.99, "gain_decay": 0.9, "refresh_every": 16}
    with pytest.raises(ValueError):
        ps.parse_variant("base:gain_decay=0.9")
    with pytest.raises(ValueError):
        ps.parse_variant("nope")


def test_cli_json(tmp_path):
    out = tmp_path / "r.json"
    res = ps.main(["--trace", str(TRACE), "--costs", *COSTS, "--decay", "0.98", "0.99",
                   "--variant", "paired", "--round-requests", "3", "--json", str(out)])
    row = json.loads(out.read_text())[str(TRACE)]
    assert row == res[str(TRACE)]
    assert [r["label"] for r in row["fixed"]] == ["chain", "16", "64"]
    assert [r["label"] for r in row["auto"]] == ["auto[decay=0.98]", "auto[decay=0.99]", "paired"]
    assert row["best_fixed"] in ("chain", "16", "64")


# ----------------------------------------------------------------------------- concurrency

def _serve_sequential(cache, table, policy=None, pin=None, order=None, untimed=0):
    """policy_sim.serve as it was before --concurrency (one request after another): the reference."""
    res = ps.RunResult(label=str(pin) if pin is not None else "auto")
    record_chain = policy is not None and policy.chain
    order = range(len(cache.requests)) if order is None else order
    for n, i in enumerate(order):
        t = cache.requests[i]
        if n == untimed:
            res = ps.RunResult(label=res.label)
        T = int(t.output.shape[0])
        res.tokens += T
        drafts, ms0, p = [], res.ms, 1
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


def _same(a, b):
    assert (a.tokens, a.steps, a.ms, a.choices, a.drafts, a.request_ms) == \
        (b.tokens, b.steps, b.ms, b.choices, b.drafts, b.request_ms)


@pytest.mark.parametrize("cls", list(ps.VARIANTS.values()))
def test_concurrency_one_is_sequential(cache, cls):
    table = ps.table_from_costs(COSTS)
    order, untimed = ps.replay_order(6, round_requests=4, rounds=2, warmup_requests=2)
    for kw in ({}, {"order": order, "untimed": untimed}):
        p1, p2 = cls(table=table), cls(table=table)
        _same(ps.serve(cache, table, policy=p1, concurrency=1, **kw), _serve_sequential(cache, table, policy=p2, **kw))
        assert p1.snapshot() == p2.snapshot()
        for c in ps.fixed_choices(table):
            _same(ps.serve(cache, table, pin=c, **kw), _serve_sequential(cache, table, pin=c, **kw))


@pytest.mark.parametrize("n", [2, 4, 16])
@pytest.mark.parametrize("choice", [CHAIN, 16, 64])
def test_pinned_drafts_do_not_depend_on_batching(cache, n, choice):
    table = ps.table_from_costs(COSTS, [1, 16])
    one = ps.serve(cache, table, pin=choice)
    res = ps.serve(cache, table, pin=choice, concurrency=n)
    assert res.drafts == one.drafts and res.tokens == one.tokens
    assert res.request_steps == one.steps and res.tokens_per_step == one.tokens_per_step
    assert -(-one.steps // n) <= res.steps <= one.steps
    if n >= len(cache.requests):  # every request in the first batch: as many steps as the longest
        assert res.steps == max(len(d) for d in one.drafts)
    assert res.ms == pytest.approx(res.steps * table.cost(choice, 1))  # --costs: the same at every bs
    # each request's wall ms covers at least its own steps
    assert all(m >= len(d) * table.cost(choice, 1) - 1e-9 for m, d in zip(res.request_ms, res.drafts))


@pytest.mark.parametrize("costs,choice", [(["16=23.23"], 16), (["64=25.79"], 64)])
def test_one_budget_table_auto_is_fixed_at_concurrency(cache, costs, choice):
    table = ps.table_from_costs(costs, [1, 4])
    fixed = ps.serve(cache, table, pin=choice, concurrency=4)
    for cls in ps.VARIANTS.values():
        auto = ps.serve(cache, table, policy=cls(table=table), concurrency=4)
        assert auto.drafts == fixed.drafts and auto.steps == fixed.steps
        assert auto.ms == fixed.ms and auto.choices == fixed.choices


class _Watch(BudgetPolicy):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen, self.chosen, self.rows = [], [], []

    def choose(self, bs):
        self.seen.append(bs)
        c = super().choose(bs)
        self.chosen.append(c)
        return c

    def record(self, verified, accepted, accept_len, chain_accept=None):
        self.rows.append((accepted.shape[0], accept_len.shape[0], None if chain_accept is None else chain_accept.shape[0]))
        super().record(verified, accepted, accept_len, chain_accept)


@pytest.mark.parametrize("n", [1, 3, 4])
def test_batch_size_never_exceeds_n_and_drains(cache, n):
    table = ps.table_from_costs(COSTS, [1, 4])
    pol = _Watch(table=table)
    res = ps.serve(cache, table, policy=pol, concurrency=n)
    seen = pol.seen
    assert len(seen) == res.steps and sum(seen) == res.request_steps and max(seen) <= n
    assert all(r[0] == r[1] == bs and r[2] in (None, bs) for r, bs in zip(pol.rows, seen))
    full = next((k for k, bs in enumerate(seen) if bs < n), len(seen))
    assert all(bs == n for bs in seen[:full])  # all slots busy while the queue lasts
    assert all(a >= b for a, b in zip(seen[full:], seen[full + 1:]))  # then it only drains
    if n > 1:
        assert seen[0] == n and seen[-1] < n


def test_budget_not_measured_at_bs_is_no_candidate(cache):
    # 64 measured at 1 request only: at bs >= 2 the policy and the fixed rows never see it
    table = StepCostTable({"DDTREE-chain": {1: 20.0, 4: 30.0}, "DDTREE-16": {1: 21.0, 4: 33.0},
                           "DDTREE-64": {1: 22.0}})
    assert ps.fixed_choices(table, 4) == [CHAIN, 16] and ps.fixed_choices(table, 1) == [CHAIN, 16, 64]
    pol = _Watch(table=table)
    res = ps.serve(cache, table, policy=pol, concurrency=4)
    assert len(pol.chosen) == res.steps and all(bs == 1 for bs, c in zip(pol.seen, pol.chosen) if c == 64)
    only_64 = StepCostTable({"DDTREE-chain": {1: 20.0, 4: 30.0}, "DDTREE-64": {1: 22.0}})
    res = ps.serve(cache, only_64, policy=_Watch(table=only_64), concurrency=4)
    assert res.choices.get(CHAIN, 0) > 0
    out = ps.evaluate(cache.requests, only_64, [("auto", BudgetPolicy, {})], concurrency=4, cache=cache)
    assert [r.label for r in out["fixed"]] == ["chain"] and out["per_request"] is None


def test_tok_s_per_request(cache):
    table = ps.table_from_costs(COSTS, [1, 4])
    res = ps.serve(cache, table, pin=16, concurrency=4)
    want = sum(1000.0 * len_ / m for len_, m in zip(res.request_tokens, res.request_ms)) / len(res.request_ms)
    assert res.tok_s_per_request == pytest.approx(want)
    one = ps.serve(cache, table, pin=16)
    assert one.tok_s_per_request > res.tok_s_per_request  # same ms per step, shared steps are longer walls


def test_merged_table(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"rows": [{"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 1.0},
                                      {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 2.0}]}))
    b.write_text(json.dumps([{"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 3.0},
                             {"config": "DDTREE-16", "concurrency": 16, "ms_per_step": 5.0}]))
    t = ps.merged_table([a, b])
    assert t.ms == {"DDTREE-chain": {1: 1.0}, "DDTREE-16": {1: 3.0, 16: 5.0}}


def test_cli_concurrency_json(tmp_path):
    out = tmp_path / "r.json"
    res = ps.main(["--trace", str(TRACE), "--costs", *COSTS, "--concurrency", "1", "4",
                   "--round-requests", "6", "--json", str(out)])
    d = json.loads(out.read_text())
    assert d == res and set(d) == {str(TRACE), f"{TRACE}@4"}
    assert d[str(TRACE)]["per_request"] is not None and d[f"{TRACE}@4"]["per_request"] is None
    assert [r["label"] for r in d[f"{TRACE}@4"]["fixed"]] == ["chain", "16", "64"]


def test_auto_is_not_trapped_by_early_unlucky_steps():
    """The GSM8K traces (drafter v1 and v2) in replay_bench's order (2 or 4 warm-up requests, 2
    rounds of 8) and the committed step costs the GPU replays choose over: budget 16 is the best
    fixed choice, but the first steps accept nothing. Deciding on one request-step of evidence
    with one-step refreshes the policy can settle on the chain, and does here (on the H100 it
    did so on the v2 trace: 708 of 710 steps, results/2026-12-07b/call5); which orders trap it
    depends on where its single refresh steps land. With the defaults (min_samples request-steps
    explored, refreshes of refresh_samples) auto serves within 3% of the best fixed choice in
    every one of these orders."""
    one_step = []
    for warmup in ("2", "4"):
        res = ps.main(["--trace", *(str(ROOT / "benchmark" / "ddtree" / "traces" / t) for t in ("gsm8k.pt", "v2/gsm8k.pt")),
                       "--table", *(str(ROOT / "benchmark" / "ddtree" / "results" / p / "step_cost.json")
                                    for p in ("2026-12-03c/call4b", "2026-12-04b/call1")),
                       "--round-requests", "8", "--rounds", "2", "--warmup-requests", warmup,
                       "--variant", "base:min_samples=1,refresh_samples=1"])
        for row in res.values():
            best = max(r["tokens_per_ms"] for r in row["fixed"])
            auto, old = row["auto"]
            assert row["best_fixed"] == "16"
            assert auto["tokens_per_ms"] >= 0.97 * best, auto
            one_step.append(old["tokens_per_ms"] / best)
    assert min(one_step) < 0.8, one_step  # the trap: the chain, ~0.78x budget 16
