"""core/widths.py: verify widths, the batch sizes each width's graphs are captured for under budget
auto (a sweep that measures budget 256 up to 16 requests gets 257-wide graphs up to 16, not 64),
and that whatever the policy may pick at a batch size has a graph covering it."""

from __future__ import annotations

import random

from sglang_ddtree.core.budget_policy import BudgetPolicy, StepCostTable
from sglang_ddtree.core.widths import (
    capture_bs_for_cap,
    largest_capture_bs,
    max_verify_rows,
    policy_width_caps,
    verify_width,
)


def _table(rows):
    """``{config: [concurrencies]}`` -> a table with made-up costs."""
    return StepCostTable({cfg: {c: 10.0 + c for c in cs} for cfg, cs in rows.items()})


def test_caps_follow_the_tables_largest_concurrency_per_budget():
    t = _table({"DDTREE-chain": [1, 4, 16, 64], "DDTREE-8": [1, 4], "DDTREE-16": [1, 4, 16, 64],
                "DDTREE-64": [1, 4, 16], "DDTREE-256": [1, 4, 16]})
    # Budget 8 verifies the draft block's 16 positions, as the chain does: any batch size.
    assert policy_width_caps(t, max_depth=15, block_size=16) == {16: None, 17: 64, 65: 16, 257: 16}
    # Without a chain row the budget measured furthest serves every batch size beyond.
    no_chain = _table({"DDTREE-16": [1, 4, 16], "DDTREE-32": [1, 4, 16], "DDTREE-64": [1, 4]})
    assert policy_width_caps(no_chain, 15, 16) == {17: None, 33: 16, 65: 4}


def test_every_choice_of_the_policy_has_graphs_at_that_batch_size():
    """For random tables: whatever the policy may pick at a batch size, the width's capture covers
    that batch size (a batch pads up to the next captured size)."""
    rng = random.Random(0)
    bs_list = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    for _ in range(200):
        conc = sorted(rng.sample([1, 4, 16, 64], rng.randint(1, 4)))
        rows = {f"DDTREE-{b}": conc[: rng.randint(1, len(conc))] for b in rng.sample([4, 8, 15, 16, 32, 64, 128, 256],
                                                                                  rng.randint(1, 4))}
        if rng.random() < 0.7:
            rows["DDTREE-chain"] = conc
        t = _table(rows)
        caps = policy_width_caps(t, 15, 16)
        policy = BudgetPolicy(t)
        for bs in range(1, 65):
            for c in policy.candidates_at(bs):
                w = verify_width(15 if c == "chain" else c, 16)
                assert w in caps, (rows, c)
                assert max(capture_bs_for_cap(bs_list, caps[w])) >= bs or caps[w] is None, (rows, c, bs, caps)


def test_capture_sizes():
    assert capture_bs_for_cap([1, 4, 16, 64], None) == [1, 4, 16, 64]
    assert capture_bs_for_cap([64, 1, 16, 4], 16) == [1, 4, 16]
    assert capture_bs_for_cap([1, 4, 16, 64], 10) == [1, 4, 16]  # 10 requests pad to 16
    assert capture_bs_for_cap([1, 4, 16, 64], 100) == [1, 4, 16, 64]
    assert largest_capture_bs([1, 4, 16, 64], {16: None, 65: 16, 257: 4}) == {16: 64, 65: 16, 257: 4}
    assert max_verify_rows([1, 4, 16, 64], {16: None, 65: 16, 257: 4}) == max(16 * 64, 65 * 16, 257 * 4)
    assert verify_width(8, 16) == 16 and verify_width(16, 16) == 17 and verify_width(64, 16) == 65
