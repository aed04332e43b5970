"""Batched builder == heap reference exactly; the set is prefix-closed and best-first."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from sglang_ddtree.core.tree_builder import build_tree, build_tree_reference


def _lp(seed, bs, L, K, n_distinct):
    """Sorted-descending per-depth log-probs with many exact ties."""
    g = torch.Generator().manual_seed(seed)
    vals = -torch.rand(n_distinct, generator=g) * 4
    lp = vals[torch.randint(0, n_distinct, (bs, L, K), generator=g)]
    lp = torch.sort(lp, dim=-1, descending=True).values
    ids = torch.stack([torch.randperm(1000, generator=g)[:K] for _ in range(bs * L)]).view(bs, L, K)
    return lp, ids


def _assert_same(a, b):
    for f in ("depth", "parent", "rank", "token"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert torch.equal(a.score, b.score)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 4), L=st.integers(1, 7),
       K=st.integers(1, 6), B=st.integers(1, 40), n_distinct=st.integers(1, 5),
       max_sib=st.one_of(st.none(), st.integers(1, 4)), max_depth=st.one_of(st.none(), st.integers(1, 6)))
def test_batched_equals_reference(seed, bs, L, K, B, n_distinct, max_sib, max_depth):
    lp, ids = _lp(seed, bs, L, K, n_distinct)
    ref = build_tree_reference(lp, ids, B, max_sib, max_depth)
    fast = build_tree(lp, ids, B, max_sib, max_depth)
    _assert_same(fast, ref)


def _all_prefixes(lp_b, L, K):
    out = {}
    for d in range(1, L + 1):
        for ranks in itertools.product(range(K), repeat=d):
            s = np.float32(0.0)
            for depth, r in enumerate(ranks):
                s = np.float32(s + np.float32(lp_b[depth, r]))
            out[ranks] = s
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), L=st.integers(1, 4), K=st.integers(1, 4), B=st.integers(1, 30),
       n_distinct=st.integers(1, 6))
def test_prefix_closed_and_no_unchosen_prefix_outscores_a_chosen_one(seed, L, K, B, n_distinct):
    lp, ids = _lp(seed, 1, L, K, n_distinct)
    tree = build_tree(lp, ids, B)
    n = int(tree.num_nodes[0])
    paths = []
    for i in range(n):
        p, r = int(tree.parent[0, i]), int(tree.rank[0, i])
        path = (paths[p] if p >= 0 else ()) + (r,)
        assert p < i, "parents come before children"
        assert len(path) == int(tree.depth[0, i])
        paths.append(path)
    chosen = set(paths)
    assert len(chosen) == n
    for path in chosen:  # prefix closed
        assert path[:-1] == () or path[:-1] in chosen
    everything = _all_prefixes(lp[0].numpy(), L, K)
    assert n == min(B, len(everything))
    worst_chosen = min(everything[p] for p in chosen)
    best_unchosen = max((s for p, s in everything.items() if p not in chosen), default=-np.inf)
    assert best_unchosen <= worst_chosen
    # Scores are reported exactly as the fp32 path sums.
    for i, path in enumerate(paths):
        assert np.float32(tree.score[0, i]) == everything[path]


def test_hand_example_best_first_order():
    lp = torch.log(torch.tensor([[[0.6, 0.3], [0.9, 0.05], [0.45, 0.4]]]))
    ids = torch.tensor([[[10, 11], [20, 21], [30, 31]]])
    tree = build_tree(lp, ids, 5)
    # (0) .6; (0,0) .54; (1) .3; (1,0) .27; (0,0,0) .243 -- a sibling subtree before depth 3
    assert tree.depth.tolist() == [[1, 2, 1, 2, 3]]
    assert tree.parent.tolist() == [[-1, 0, -1, 2, 1]]
    assert tree.token.tolist() == [[10, 20, 11, 20, 30]]
    _assert_same(tree, build_tree_reference(lp, ids, 5))


def test_fixed_shape_padding_when_budget_exceeds_tree():
    lp = torch.log(torch.tensor([[[1.0], [1.0]]]))
    ids = torch.tensor([[[5], [6]]])
    tree = build_tree(lp, ids, 5)
    assert tree.depth.tolist() == [[1, 2, -1, -1, -1]]
    assert torch.isinf(tree.score[0, 2:]).all()


# --- max_siblings=1: the rank-0 chain (the DFLASH chain budget auto falls back to) -------------
# Both builders share the cap arithmetic, so their cross-check cannot see it off by one; these
# expectations are written out by hand.

BUILDERS = [build_tree, build_tree_reference]


@pytest.mark.parametrize("builder", BUILDERS, ids=["batched", "reference"])
def test_max_siblings_one_is_exactly_the_rank0_chain_hand_example(builder):
    # Rank 1 at depth 1 (0.35) outscores the depth-3 chain node (0.4 * 0.9 * 0.5 = 0.18): an
    # uncapped tree of 3 nodes would take it; the capped one must not.
    lp = torch.log(torch.tensor([[[0.4, 0.35, 0.25], [0.9, 0.05, 0.05], [0.5, 0.3, 0.2]]]))
    ids = torch.tensor([[[10, 11, 12], [20, 21, 22], [30, 31, 32]]])
    uncapped = builder(lp, ids, 3)
    assert uncapped.token.tolist() == [[10, 20, 11]]

    chain = builder(lp, ids, 5, max_siblings=1)
    assert chain.depth.tolist() == [[1, 2, 3, -1, -1]]
    assert chain.parent.tolist() == [[-1, 0, 1, -1, -1]]
    assert chain.rank.tolist() == [[0, 0, 0, -1, -1]]
    assert chain.token.tolist() == [[10, 20, 30, -1, -1]]
    want = np.cumsum(lp[0, :, 0].numpy().astype(np.float32), dtype=np.float32)
    assert chain.score[0, :3].tolist() == want.tolist()
    assert torch.isinf(chain.score[0, 3:]).all()

    # The budget cuts the chain; max_depth cuts it too.
    assert builder(lp, ids, 2, max_siblings=1).token.tolist() == [[10, 20]]
    capped = builder(lp, ids, 4, max_siblings=1, max_depth=2)
    assert capped.token.tolist() == [[10, 20, -1, -1]] and capped.parent.tolist() == [[-1, 0, -1, -1]]

    # max_siblings=2: ranks 0 and 1 only (rank 2 at depth 1, 0.25, would beat 0.4*0.9*0.5).
    two = builder(lp, ids, 5, max_siblings=2)
    # (0) .4; (0,0) .36; (1) .35; (1,0) .315; (0,0,0) .18
    assert two.token.tolist() == [[10, 20, 11, 20, 30]]
    assert two.parent.tolist() == [[-1, 0, -1, 2, 1]]
    assert two.rank.tolist() == [[0, 0, 1, 0, 0]]


@pytest.mark.parametrize("builder", BUILDERS, ids=["batched", "reference"])
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 3), L=st.integers(1, 7), K=st.integers(1, 6),
       B=st.integers(1, 12), n_distinct=st.integers(1, 5), max_depth=st.one_of(st.none(), st.integers(1, 8)))
def test_max_siblings_one_is_exactly_the_rank0_chain(builder, seed, bs, L, K, B, n_distinct, max_depth):
    lp, ids = _lp(seed, bs, L, K, n_distinct)
    tree = builder(lp, ids, B, max_siblings=1, max_depth=max_depth)
    n = min(B, L if max_depth is None else min(L, max_depth))
    pad = [-1] * (B - n)
    for b in range(bs):
        assert tree.depth[b].tolist() == list(range(1, n + 1)) + pad
        assert tree.parent[b].tolist() == list(range(-1, n - 1)) + pad
        assert tree.rank[b].tolist() == [0] * n + pad
        assert tree.token[b].tolist() == ids[b, :n, 0].tolist() + pad
        want = np.cumsum(lp[b, :n, 0].numpy(), dtype=np.float32)
        assert tree.score[b, :n].tolist() == want.tolist()
        assert torch.isinf(tree.score[b, n:]).all()


# --- ties across depths -------------------------------------------------------------------------
# Random fp32 log-probs never make a depth-d path sum equal a path sum of another depth. Log-probs
# on a dyadic grid (multiples of 1/4, zero included) add up exactly in fp32, so a node often
# ties with nodes of other depths (and a child with a rank-0 log-prob of 0 ties its parent):
# there the order falls to the key's depth, parent-order and rank fields.


def _dyadic_lp(seed, bs, L, K, steps):
    """Sorted-descending log-probs drawn from {0, -1/4, ..., -steps/4} (exact fp32 sums)."""
    g = torch.Generator().manual_seed(seed)
    lp = -torch.randint(0, steps + 1, (bs, L, K), generator=g).float() / 4
    lp = torch.sort(lp, dim=-1, descending=True).values
    ids = torch.stack([torch.randperm(1000, generator=g)[:K] for _ in range(bs * L)]).view(bs, L, K)
    return lp, ids


def _cross_depth_tie(tree, b):
    n = int(tree.num_nodes[b])
    by_score = {}
    for i in range(n):
        by_score.setdefault(float(tree.score[b, i]), set()).add(int(tree.depth[b, i]))
    return any(len(depths) > 1 for depths in by_score.values())


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 4), L=st.integers(2, 7), K=st.integers(1, 6),
       B=st.integers(2, 40), steps=st.integers(1, 8),
       max_sib=st.one_of(st.none(), st.integers(1, 4)), max_depth=st.one_of(st.none(), st.integers(2, 6)))
def test_batched_equals_reference_with_ties_across_depths(seed, bs, L, K, B, steps, max_sib, max_depth):
    lp, ids = _dyadic_lp(seed, bs, L, K, steps)
    _assert_same(build_tree(lp, ids, B, max_sib, max_depth), build_tree_reference(lp, ids, B, max_sib, max_depth))


def test_dyadic_inputs_do_tie_across_depths():
    """The strategy above exercises what it is for: most drawn trees hold equal scores at
    different depths."""
    hits = sum(_cross_depth_tie(build_tree_reference(*_dyadic_lp(seed, 1, 5, 4, 4), 16), 0) for seed in range(50))
    assert hits >= 25, hits


def test_hand_example_ties_across_depths_follow_the_key():
    # Scores: (0) -1, (1) -1, (0,0) -1, (1,0) -1, (0,1) -2, (1,1) -2. Equal scores order by
    # depth, then the parent's position, then rank.
    lp = torch.tensor([[[-1.0, -1.0], [0.0, -1.0]]])
    ids = torch.tensor([[[10, 11], [20, 21]]])
    for builder in BUILDERS:
        tree = builder(lp, ids, 6)
        assert tree.depth.tolist() == [[1, 1, 2, 2, 2, 2]]
        assert tree.parent.tolist() == [[-1, -1, 0, 1, 0, 1]]
        assert tree.rank.tolist() == [[0, 1, 0, 0, 1, 1]]
        assert tree.token.tolist() == [[10, 11, 20, 20, 21, 21]]
        assert tree.score.tolist() == [[-1.0, -1.0, -1.0, -1.0, -2.0, -2.0]]
    # A depth-1 node ties a depth-2 node: the shallower one first.
    lp = torch.tensor([[[-1.0, -2.0], [-1.0, -1.5]]])
    for builder in BUILDERS:
        tree = builder(lp, ids, 4)
        assert tree.depth.tolist() == [[1, 1, 2, 2]] and tree.parent.tolist() == [[-1, -1, 0, 0]]
        assert tree.rank.tolist() == [[0, 1, 0, 1]] and tree.score.tolist() == [[-1.0, -2.0, -2.0, -2.5]]
