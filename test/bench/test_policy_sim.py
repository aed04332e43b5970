"""benchmark/ddtree/policy_sim.py: budget auto served offline on a recorded trace at concurrency
1 — pinned choices reproduce core/trace_sim.simulate, a one-candidate table makes auto that
fixed choice, the shadow chain agrees with the chain where it is not censored, and the variants'
estimators give their documented values."""

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
