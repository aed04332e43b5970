"""Batched builder == heap reference exactly; the set is prefix-closed and best-first."""

from __future__ import annotations

import itertools

import numpy as np
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
