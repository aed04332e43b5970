"""core/budget_policy.py: step-cost interpolation; the acceptance profile is exact for every
budget up to the verified one (prefix-closed best-first trees); the choice maximises expected
tokens per ms, explores the largest budget until every candidate has ``min_samples``
request-steps behind its estimate, refreshes the next budget up in bursts of
``refresh_samples`` request-steps, and falls back to the chain when trees do not pay."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core.budget_policy import CHAIN, BudgetPolicy, StepCostTable


def _table(rows):
    return StepCostTable.from_rows([dict(config=c, concurrency=n, ms_per_step=m) for c, n, m in rows])


# The choice rule on one request-step per estimate and one-step refreshes: the tests of the
# rule itself (the evidence thresholds have their own tests below).
ONE = dict(min_samples=1, refresh_samples=1)


def _known(p, values):
    """Set estimates as if each had ``min_samples`` request-steps behind it."""
    p._mean.update(values)
    for c in values:
        p._seen[c] = max(p._seen.get(c, 0), p.min_samples)


def test_cost_interpolates_between_concurrencies_and_is_flat_outside():
    t = _table([("DDTREE-32", 1, 10.0), ("DDTREE-32", 4, 16.0), ("DDTREE-chain", 1, 8.0)])
    assert t.cost(32, 1) == 10.0 and t.cost(32, 4) == 16.0
    assert t.cost(32, 2) == pytest.approx(12.0)
    assert t.cost(32, 64) == 16.0 and t.cost(CHAIN, 7) == 8.0
    assert t.budgets() == [32] and t.has_chain()


def test_profile_is_exact_for_smaller_budgets_and_silent_for_larger():
    p = BudgetPolicy(_table([(f"DDTREE-{b}", 1, 1.0) for b in (8, 16, 32)]), chain=False, flush_every=1)
    # Request 0 accepted positions 0 -> 3 -> 12 -> 20 (3 drafts); request 1 positions 0 -> 5 (1 draft).
    accepted = torch.tensor([[0, 3, 12, 20, -1], [0, 5, -1, -1, -1]])
    accept_len = torch.tensor([3, 1])
    p.record(16, accepted, accept_len)
    # Budget 8 holds positions 1..8: request 0 keeps 1 draft (position 3), request 1 keeps 1.
    assert p.expected(8) == pytest.approx(1.0)
    # Budget 16: request 0 keeps 2 (3, 12), request 1 keeps 1.
    assert p.expected(16) == pytest.approx(1.5)
    assert p.expected(32) is None  # never verified that large


def test_profile_counts_a_node_at_position_b_inside_budget_b():
    """Boundaries: the budget-b tree holds verify positions 1..b, so a node accepted at
    position exactly b counts for budget b and one at b + 1 does not; a path filling the
    whole ``accepted`` row (no -1 padding) counts every one of its accept_len drafts."""
    p = BudgetPolicy(_table([(f"DDTREE-{b}", 1, 1.0) for b in (8, 16, 32)]), chain=False, flush_every=1)
    accepted = torch.tensor([
        [0, 8, 16, 17],  # 3 drafts at 8, 16, 17: budget 8 keeps 1, 16 keeps 2, 32 keeps 3
        [0, 9, -1, -1],  # 1 draft at 9 (just past 8): budget 8 keeps 0, 16 and 32 keep 1
        [0, 1, 2, -1],   # 2 drafts at 1, 2: every budget keeps 2
        [0, -1, -1, -1],  # nothing accepted: 0 everywhere
    ])
    accept_len = torch.tensor([3, 1, 2, 0])
    p.record(32, accepted, accept_len)
    assert p.expected(8) == pytest.approx((1 + 0 + 2 + 0) / 4)
    assert p.expected(16) == pytest.approx((2 + 1 + 2 + 0) / 4)
    assert p.expected(32) == pytest.approx((3 + 1 + 2 + 0) / 4)
    # Verifying exactly budget 16 makes budget 16 known (and 32 not): a node at 16 counts.
    q = BudgetPolicy(_table([(f"DDTREE-{b}", 1, 1.0) for b in (8, 16, 32)]), chain=False, flush_every=1)
    q.record(16, torch.tensor([[0, 8, 16]]), torch.tensor([2]))
    assert (q.expected(8), q.expected(16), q.expected(32)) == (1.0, 2.0, None)


def test_choice_explores_then_picks_the_best_tokens_per_ms():
    t = _table([("DDTREE-8", 1, 10.0), ("DDTREE-8", 16, 12.0), ("DDTREE-64", 1, 12.0), ("DDTREE-64", 16, 60.0),
                ("DDTREE-chain", 1, 9.0), ("DDTREE-chain", 16, 10.0)])
    p = BudgetPolicy(t, refresh_every=1000, flush_every=1, **ONE)
    assert p.choose(1) == 64  # nothing known yet: verify the largest budget
    deep = torch.tensor([[0, 2, 5, 30, 40, -1]])  # 4 drafts, two of them inside budget 8
    p.record(64, deep, torch.tensor([4]), chain_accept=torch.tensor([1]))
    assert (p.expected(8), p.expected(64), p.expected(CHAIN)) == (2.0, 4.0, 1.0)
    # bs 1: 64 gives 5 / 12, 8 gives 3 / 10, chain 2 / 9 -> the big tree.
    assert p.choose(1) == 64
    # bs 16: 64 costs 60 ms -> 5 / 60; 8 gives 3 / 12 -> budget 8.
    assert p.choose(16) == 8
    # If the trees accept nothing beyond the chain, the chain's lower cost wins.
    _known(p, {8: 1.0, 64: 1.0, CHAIN: 1.0})
    assert p.choose(16) == CHAIN


def test_refresh_and_chain_steps():
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-32", 1, 2.0), ("DDTREE-chain", 1, 1.0)])
    p = BudgetPolicy(t, refresh_every=3, flush_every=1, **ONE)
    for c, v in {8: 1.0, 32: 1.0, CHAIN: 5.0}.items():
        p._update(c, v, 1)
    # The refresh at step 3 verifies the next budget above the chain (8), not the largest (32).
    assert [p.choose(1) for _ in range(6)] == [CHAIN, CHAIN, 8, CHAIN, CHAIN, CHAIN]
    p.record(CHAIN, torch.tensor([[0, 1, 2, -1]]), torch.tensor([2]))  # a chain step updates the chain only
    assert p.expected(CHAIN) == pytest.approx((0.99 * 5.0 + 2.0) / (0.99 + 1)) and p.expected(8) == 1.0


def test_estimates_are_decayed_means_of_every_step():
    """``sum decay^age x / sum decay^age``: the first step weighs as any other at its age."""
    p = BudgetPolicy(_table([("DDTREE-2", 1, 1.0)]), decay=0.5)
    p._update(2, 0.0, 1)
    p._update(2, 3.0, 2)  # two request-steps of mean 3: (0.25 * 0 + 2 * 3) / (0.25 + 2)
    assert p.expected(2) == pytest.approx(6 / 2.25)


def test_one_unlucky_first_step_does_not_trap_the_chain():
    """The first step verifies the largest budget and accepts nothing, so every estimate starts
    at 0 and the chain (cheapest) is chosen; the trees accept 3 drafts a step from then on, the
    chain 1. The first refresh of budget 8 must make it the choice: its estimate is the mean of
    its two steps (0 and 3), not the first step's 0 moved 1% towards 3 (the estimate rule alone:
    one request-step of evidence, one-step refreshes)."""
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-32", 1, 1.2), ("DDTREE-chain", 1, 1.0)])
    p = BudgetPolicy(t, refresh_every=4, flush_every=1, **ONE)
    path = lambda n: torch.tensor([list(range(n + 1)) + [-1] * (8 - n)])  # noqa: E731
    assert p.choose(1) == 32
    p.record(32, path(0), torch.tensor([0]), chain_accept=torch.tensor([0]))
    choices = []
    for _ in range(12):
        c = p.choose(1)
        choices.append(c)
        if c == CHAIN:
            p.record(CHAIN, path(1), torch.tensor([1]))
        else:
            p.record(c, path(3), torch.tensor([3]), chain_accept=torch.tensor([1]))
    assert choices[:3] == [CHAIN] * 3 and choices[3] == 8  # the refresh
    # (3 + 1) / 1.0 ms beats the chain's (1 + 1) / 1.0: no chain step after the refresh (one
    # refresh of 32 follows the change of choice; 32 accepts no more than 8 and costs more).
    assert CHAIN not in choices[3:] and choices[4:].count(8) >= 7, choices


def test_budgets_are_candidates_only_up_to_their_largest_measured_concurrency():
    """A budget measured up to 16 requests (a sweep's cap) is no candidate at 17 or more: its
    cost there is unknown, and flat from the 16-request row it would look far too cheap. The
    exploration and the refreshes verify the largest budget valid at the batch size, and a
    candidate never valid at this batch size does not force a read-back every step."""
    t = _table([("DDTREE-16", 1, 10.0), ("DDTREE-16", 64, 30.0), ("DDTREE-256", 1, 12.0), ("DDTREE-256", 16, 40.0),
                ("DDTREE-chain", 1, 9.0), ("DDTREE-chain", 64, 25.0)])
    assert t.max_concurrency(256) == 16 and t.max_concurrency(CHAIN) == 64
    p = BudgetPolicy(t, refresh_every=1000, flush_every=4)
    assert p.candidates_at(16) == [CHAIN, 16, 256] and p.candidates_at(17) == [CHAIN, 16]
    assert p.choose(64) == 16  # exploring at 64 requests: the largest budget measured there
    path = torch.tensor([[0, 3, 9, -1]] * 64)
    p.record(16, path, torch.tensor([2] * 64), chain_accept=torch.tensor([1] * 64))
    assert p.expected(16) == 2.0 and p.expected(CHAIN) == 1.0 and p.expected(256) is None
    # Steady state at 64 requests: budget 256 stays unknown, yet read-backs wait flush_every steps.
    p.record(16, path, torch.tensor([1] * 64), chain_accept=torch.tensor([1] * 64))
    assert p.expected(16) == 2.0
    # A huge acceptance for 256 would not make it a choice at 64 requests.
    p._mean[256] = 100.0
    assert p.choose(64) == 16 and p.choose(16) == 256
    # Only the chain measured that far: the chain, without exploring.
    q = BudgetPolicy(_table([("DDTREE-64", 1, 12.0), ("DDTREE-chain", 1, 9.0), ("DDTREE-chain", 64, 25.0)]))
    assert q.candidates_at(64) == [CHAIN] and q.choose(64) == CHAIN
    # No chain, no budget measured that far: the budget measured at the most requests (then the smaller).
    r = BudgetPolicy(_table([("DDTREE-8", 4, 5.0), ("DDTREE-32", 4, 6.0), ("DDTREE-64", 1, 7.0)]), chain=False)
    assert r.candidates_at(16) == [8]


def test_a_table_without_trees_is_refused():
    with pytest.raises(ValueError, match="DDTREE-<budget>"):
        BudgetPolicy(_table([("DFLASH", 1, 1.0)]))


def test_device_sums_are_read_back_every_flush_every_steps():
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-16", 1, 2.0)])
    p = BudgetPolicy(t, flush_every=2)
    path = torch.tensor([[0, 3, 12, -1]])
    # The first step is read back at once: until every candidate has an estimate the policy
    # verifies the largest (dearest) budget, so it must not wait flush_every steps.
    p.record(16, path, torch.tensor([2]))
    assert (p.expected(8), p.expected(16)) == (1.0, 2.0)
    p.record(16, torch.tensor([[0, 3, 5, -1]]), torch.tensor([2]))
    assert p.expected(8) == 1.0  # now estimates exist: read back every 2nd step
    p.record(16, torch.tensor([[0, 3, 5, -1]]), torch.tensor([2]))
    assert p.expected(8) > 1.0


def test_refreshes_back_off_while_they_change_nothing():
    """A refresh verifies the next budget above the choice; while the refreshed profile leaves
    the choice as it was, the interval doubles (up to max_refresh_every); a refresh that changes
    the choice resets it."""
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-32", 1, 2.0), ("DDTREE-chain", 1, 1.0)])
    p = BudgetPolicy(t, refresh_every=3, max_refresh_every=12, flush_every=1, **ONE)
    _known(p, {8: 1.0, 32: 1.0, CHAIN: 5.0})  # the chain wins: 6 / 1.0 ms
    picks = [p.choose(1) for _ in range(40)]
    refreshes = [i + 1 for i, c in enumerate(picks) if c == 8]
    assert refreshes == [3, 9, 21, 33]  # intervals 3, 6, 12, then capped at 12
    assert set(picks) == {CHAIN, 8}  # never the dearest budget
    # The traffic changes and the next refresh shows it (its data read back at once here): the
    # choice moves to budget 8, the interval is back to refresh_every, and the next refresh
    # looks one budget further (32).
    more = []
    for _ in range(20):
        more.append(p.choose(1))
        if more[-1] == 8 and more.count(8) == 1:
            _known(p, {8: 20.0, 32: 1.0, CHAIN: 0.0})
    first = more.index(8)
    assert more[first + 1] == 8
    assert more.index(32) - first == 3 * 2  # the interval times 32's cost over 8's (2.0 / 1.0 ms)


def test_refreshes_climb_one_budget_at_a_time_and_stop_at_the_top():
    """Traffic where each larger budget pays (its acceptance shows only once it is verified):
    the choice climbs chain -> 8 -> 16 -> 64 one refresh at a time, each refresh verifying the
    budget just above the choice; at the largest budget nothing is refreshed."""
    t = _table([("DDTREE-8", 1, 2.0), ("DDTREE-16", 1, 2.2), ("DDTREE-64", 1, 3.0), ("DDTREE-chain", 1, 1.9)])
    truth = {CHAIN: 1.0, 8: 2.0, 16: 4.0, 64: 9.0}  # drafts accepted a step, once verified
    p = BudgetPolicy(t, refresh_every=4, flush_every=1, **ONE)
    _known(p, {CHAIN: 1.0, 8: 0.5, 16: 0.5, 64: 0.5})  # stale: trees looked worthless
    picks = []
    for _ in range(40):
        c = p.choose(1)
        picks.append(c)
        if c != CHAIN:  # verifying c gives the true acceptance of every budget up to c
            _known(p, {b: truth[b] for b in (8, 16, 64) if b <= c})
    order = [c for i, c in enumerate(picks) if i == 0 or c != picks[i - 1]]
    assert order[:2] == [CHAIN, 8] and 64 in order
    # Never a jump past the next budget: every change of choice is to the neighbour or back.
    ladder = [CHAIN, 8, 16, 64]
    assert all(abs(ladder.index(b) - ladder.index(a)) == 1 for a, b in zip(order, order[1:]))
    assert picks[-12:] == [64] * 12  # at the top: no refresh above the largest budget


def test_steady_state_read_back_never_waits_for_the_device(monkeypatch):
    """After the start-up (a candidate without an estimate reads at once), the sums go to the
    host asynchronously every flush_every steps and are folded in only once the copy is done:
    no host sync in the worker's step (it would stall the overlap scheduler's next launch)."""
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-16", 1, 2.0)])
    p = BudgetPolicy(t, flush_every=2, chain=False)
    copies = []

    def fake_copy(sums):  # a pending device copy: done only when the test says so
        state = {"done": False, "waited": False}
        copies.append(state)

        def wait():
            state["waited"] = True
            state["done"] = True
        return sums.clone(), (lambda: state["done"]), wait

    monkeypatch.setattr(BudgetPolicy, "_copy_to_host", staticmethod(fake_copy))
    path = torch.tensor([[0, 3, 12, -1]])
    p.record(16, path, torch.tensor([2]))  # start-up: synchronous, both estimates now known
    assert (p.expected(8), p.expected(16)) == (1.0, 2.0) and copies == []
    far = torch.tensor([[0, 3, 5, -1]])  # now both drafts inside budget 8
    p.record(16, far, torch.tensor([2]))
    p.record(16, far, torch.tensor([2]))  # flush_every reached: an asynchronous copy starts
    assert len(copies) == 1 and p.expected(8) == 1.0  # not folded while the copy is pending
    p.record(16, far, torch.tensor([2]))
    assert p.expected(8) == 1.0 and not copies[0]["waited"]  # polling never waits
    copies[0]["done"] = True
    p.record(16, far, torch.tensor([2]))  # the next step folds the finished copy in
    assert p.expected(8) > 1.0 and not copies[0]["waited"]
    # flush() (server_info, tests) does wait for whatever is pending.
    p.record(16, far, torch.tensor([2]))
    assert len(copies) == 2
    before = p.expected(8)
    p.flush()
    assert copies[1]["waited"] and p.expected(8) > before


def test_a_tree_must_beat_the_chain_by_more_than_the_margin():
    """The table's rows come from separate engines whose step times differ by a few percent: a
    tree within ``chain_margin`` of the chain's tokens per ms is not worth its extra per-step
    work (budget 8 read 0.5% cheaper than another call's chain and ran behind it)."""
    t = _table([("DDTREE-8", 64, 133.07), ("DDTREE-16", 64, 150.0), ("DDTREE-chain", 64, 133.77)])
    p = BudgetPolicy(t, refresh_every=1000, flush_every=1)
    _known(p, {8: 1.0, 16: 1.0, CHAIN: 1.0})
    assert p.choose(64) == CHAIN  # budget 8 is 0.5% "better": within the margin
    p._mean.update({8: 1.02})  # 2.02 / 133.07 vs 2 / 133.77: +1.5%, still within 2%
    assert p.choose(64) == CHAIN
    p._mean.update({8: 1.04})  # +2.5%: the tree pays
    assert p.choose(64) == 8
    q = BudgetPolicy(t, refresh_every=1000, flush_every=1, chain_margin=0.0)
    _known(q, {8: 1.0, 16: 1.0, CHAIN: 1.0})
    assert q.choose(64) == 8  # no margin: the cheaper row wins


def _serve(p, steps, bs, accept):
    """``steps`` steps at batch size ``bs``: each verifies ``p.choose(bs)`` and records that
    every request accepted ``accept[choice]`` drafts (the chain's shadow: ``accept[CHAIN]``)."""
    picks = []
    for _ in range(steps):
        c = p.choose(bs)
        picks.append(c)
        a = accept[c]
        path = torch.tensor([list(range(a + 1)) + [-1] * (16 - a)] * bs)
        p.record(c, path, torch.tensor([a] * bs), chain_accept=None if c == CHAIN else torch.tensor([accept[CHAIN]] * bs))
    return picks


def test_exploration_lasts_until_every_candidate_has_min_samples():
    """A first step that accepts nothing anywhere ranks the chain first (the cheapest); with
    ``min_samples`` the policy keeps verifying the largest budget until every candidate has that
    many request-steps behind its estimate, then chooses on them. At 8 requests a step brings 8
    request-steps: two steps for 16."""
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-8", 8, 2.0), ("DDTREE-32", 1, 1.2), ("DDTREE-32", 8, 2.6),
                ("DDTREE-chain", 1, 0.9), ("DDTREE-chain", 8, 1.8)])
    p = BudgetPolicy(t, refresh_every=1000, flush_every=1, min_samples=16)
    first = _serve(p, 1, 1, {32: 0, CHAIN: 0})
    assert first == [32] and p.expected(CHAIN) == p.expected(8) == 0.0  # the unlucky first step
    picks = _serve(p, 20, 1, {8: 3, 32: 3, CHAIN: 1})
    assert picks[:15] == [32] * 15 and p.folded(8) >= 16  # 16 request-steps in all, then the choice
    assert set(picks[15:]) == {8}  # (3 + 1) / 1.0 beats the chain's (1 + 1) / 0.9 and 32's 4 / 1.2
    q = BudgetPolicy(t, refresh_every=1000, flush_every=1, min_samples=16)
    assert _serve(q, 3, 8, {8: 3, 32: 3, CHAIN: 1}) == [32, 32, 8]
    # Exploration counts recorded request-steps, not read-back ones: with read-backs every 8
    # steps it still lasts 2 steps at 8 requests, and the step that completes it reads back at
    # once (the first choice rests on all 16).
    w = BudgetPolicy(t, refresh_every=1000, flush_every=8, min_samples=16)
    assert _serve(w, 3, 8, {8: 3, 32: 3, CHAIN: 1}) == [32, 32, 8] and w.folded(8) == 16
    # The same first step with one request-step of evidence: the chain, on 0 vs 0.
    r = BudgetPolicy(t, refresh_every=1000, flush_every=1, **ONE)
    assert _serve(r, 3, 1, {32: 0, 8: 0, CHAIN: 0}) == [32, CHAIN, CHAIN]


def test_a_refresh_verifies_the_next_budget_for_refresh_samples_request_steps():
    """Every ``refresh_every`` steps the next budget above the choice is verified for
    ``ceil(refresh_samples / bs)`` steps in a row; the choice moves to it when those request-steps
    show it pays (one unlucky step no longer decides), and the interval doubles while refreshes
    change nothing."""
    t = _table([("DDTREE-8", 1, 1.0), ("DDTREE-8", 4, 1.5), ("DDTREE-32", 1, 1.2), ("DDTREE-32", 4, 2.0),
                ("DDTREE-chain", 1, 1.0), ("DDTREE-chain", 4, 1.4)])
    p = BudgetPolicy(t, refresh_every=10, max_refresh_every=40, flush_every=1, min_samples=1, refresh_samples=6)
    _known(p, {8: 0.0, 32: 0.0, CHAIN: 1.0})  # stale: trees looked worthless
    picks = _serve(p, 9, 1, {8: 0, 32: 0, CHAIN: 1})
    assert picks == [CHAIN] * 9
    # The refresh at step 10: budget 8 for 6 request-steps; its first one accepts nothing, the
    # next five accept 3 each.
    accept = iter([0, 3, 3, 3, 3, 3])
    burst = []
    for _ in range(6):
        c = p.choose(1)
        burst.append(c)
        a = next(accept)
        p.record(c, torch.tensor([list(range(a + 1)) + [-1] * (16 - a)]), torch.tensor([a]),
                 chain_accept=torch.tensor([1]))
    assert burst == [8] * 6
    assert p.choose(1) == 8  # 8 now pays: (2.5 + 1) / 1.0 vs (1 + 1) / 1.0
    # At 4 requests a burst of 6 request-steps is 2 steps; refreshes that change nothing double
    # the interval (the next refresh looks above 8: budget 32, which accepts no more here).
    q = BudgetPolicy(t, refresh_every=4, max_refresh_every=16, flush_every=1, min_samples=1, refresh_samples=6)
    _known(q, {8: 3.0, 32: 3.0, CHAIN: 1.0})
    picks = _serve(q, 60, 4, {8: 3, 32: 3, CHAIN: 1})
    runs = [i for i, c in enumerate(picks[:-1]) if c == 32 and (i == 0 or picks[i - 1] != 32)]
    assert len(runs) >= 3 and set(picks) == {8, 32}, picks
    assert all(picks[i + 1] == 32 and picks[i + 2] == 8 for i in runs)  # 2 steps each
    gaps = [b - a for a, b in zip(runs, runs[1:])]
    assert gaps == sorted(gaps) and gaps[-1] > gaps[0]  # backing off


def test_a_dearer_refresh_waits_longer():
    """A refresh whose step costs r times the choice's waits r times the interval, so refreshes
    take about the same share of the time at every batch size: at 16 requests budget 64 costs
    3x budget 16 and is refreshed a third as often."""
    t = _table([("DDTREE-16", 16, 30.0), ("DDTREE-64", 16, 90.0), ("DDTREE-chain", 16, 28.0)])
    p = BudgetPolicy(t, refresh_every=10, max_refresh_every=10, flush_every=1, **ONE)
    _known(p, {16: 2.0, 64: 2.0, CHAIN: 1.0})  # 16 wins; 64 accepts no more
    picks = [p.choose(16) for _ in range(95)]
    assert [i + 1 for i, c in enumerate(picks) if c == 64] == [30, 60, 90]
