"""core/accept.py: the greedy tree walk vs brute force and hand cases; sampled walks emit the
target's (filtered) distribution."""

from __future__ import annotations

import random

import pytest

import torch
from hypothesis import given, settings, strategies as st

from sglang_ddtree.core.accept import tree_walk, tree_walk_reference
from random_trees import random_trees
from sglang_ddtree.core.verify_layout import build_verify_layout


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 3), L=st.integers(1, 6), K=st.integers(1, 4), B=st.integers(1, 30))
def test_walk_matches_brute_force(seed, bs, L, K, B):
    tree = random_trees(seed, bs, L, K, B)
    lay = build_verify_layout(tree, torch.zeros(bs, dtype=torch.long), torch.zeros(bs, dtype=torch.long), L)
    rng = random.Random(seed)
    # Targets that follow the tree part of the way (so acceptance really happens), then noise.
    target = torch.randint(0, 50, lay.tokens.shape, generator=torch.Generator().manual_seed(seed))
    for b in range(bs):
        for i in range(lay.tokens.shape[1]):
            kids = [c for c in range(lay.tokens.shape[1]) if int(lay.parent[b, c]) == i]
            if kids and rng.random() < 0.7:
                target[b, i] = lay.tokens[b, rng.choice(kids)]
    acc = tree_walk(lay.tokens, lay.parent, lay.depth, target, L)
    paths = tree_walk_reference(lay.tokens, lay.parent, target)
    for b, path in enumerate(paths):
        a = len(path) - 1
        assert int(acc.accept_len[b]) == a
        assert acc.accepted[b, : a + 1].tolist() == path
        assert (acc.accepted[b, a + 1 :] == -1).all()
        want = [int(lay.tokens[b, p]) for p in path[1:]] + [int(target[b, path[-1]])]
        assert acc.new_tokens[b, : a + 1].tolist() == want
        assert int(acc.num_new[b]) == a + 1


def test_walk_accepts_non_first_sibling_and_full_depth():
    # root -> {1: tok 5, 2: tok 6}; 2 -> {3: tok 7}; 3 -> {4: tok 8}
    tokens = torch.tensor([[9, 5, 6, 7, 8]])
    parent = torch.tensor([[-1, 0, 0, 2, 3]])
    depth = torch.tensor([[0, 1, 1, 2, 3]])
    target = torch.tensor([[6, 0, 7, 8, 42]])
    acc = tree_walk(tokens, parent, depth, target, 3)
    assert acc.accepted.tolist() == [[0, 2, 3, 4]]
    assert acc.accept_len.tolist() == [3]
    assert acc.new_tokens.tolist() == [[6, 7, 8, 42]]


def _sampled_one_child_walk(child_token, root_probs, child_probs, n, seed, **filters):
    """n independent sampled walks (T = 1) over a root with one child proposing ``child_token``;
    returns (logits ``[n, 2, V]``, Acceptance)."""
    from sglang_ddtree.core.accept import target_tokens

    tokens = torch.tensor([[0, child_token]])
    parent = torch.tensor([[-1, 0]])
    depth = torch.tensor([[0, 1]])
    logits = torch.stack([torch.log(torch.tensor(root_probs)), torch.log(torch.tensor(child_probs))])
    logits = logits.expand(n, 2, len(root_probs))
    g = torch.Generator().manual_seed(seed)
    tgt = target_tokens(logits, torch.ones(n), generator=g, **filters)
    return logits, tree_walk(tokens.expand(n, 2), parent.expand(n, 2), depth.expand(n, 2), tgt, 1)


def test_sampled_walk_emits_target_distribution():
    """Lossless at T > 0: the first emitted token is distributed as the target at the root,
    whatever the draft proposes (here the draft's only child is the target's likeliest token)."""
    from sglang_ddtree.core.accept import target_tokens

    n = 20000
    logits, acc = _sampled_one_child_walk(2, [0.1, 0.2, 0.7], [0.5, 0.25, 0.25], n, seed=1234)
    first = acc.new_tokens[:, 0]
    freq = torch.bincount(first, minlength=3).float() / n
    assert torch.allclose(freq, torch.tensor([0.1, 0.2, 0.7]), atol=0.015)
    # Second token exists only after accepting the child; then it follows the child's dist.
    second = acc.new_tokens[acc.accept_len == 1, 1]
    f2 = torch.bincount(second, minlength=3).float() / second.numel()
    assert torch.allclose(f2, torch.tensor([0.5, 0.25, 0.25]), atol=0.02)
    # Greedy rows take the argmax.
    assert target_tokens(logits[:2], torch.zeros(2)).tolist() == [[2, 0], [2, 0]]


def _filtered_reference(p, top_k, top_p, min_p):
    """float64, one row, straight from the definitions in accept.filtered_probs's docstring."""
    p = p.double()
    order = sorted(range(len(p)), key=lambda i: -float(p[i]))
    keep, mass = [], 0.0
    for rank, i in enumerate(order):
        ok = rank < top_k and mass <= top_p and float(p[i]) >= min_p * float(p[order[0]])
        if ok or rank == 0:
            keep.append(i)
        mass += float(p[i])
    out = torch.zeros_like(p)
    out[keep] = p[keep]
    return out / out.sum()


@pytest.mark.parametrize("top_k,top_p,min_p", [(2, 1.0, 0.0), (1 << 30, 0.75, 0.0), (1 << 30, 1.0, 0.3),
                                               (3, 0.6, 0.1), (1 << 30, 0.0, 0.0)])
def test_filtered_probs_match_the_definitions(top_k, top_p, min_p):
    from sglang_ddtree.core.accept import filtered_probs

    torch.manual_seed(0)
    logits = torch.randn(3, 4, 7)
    temps = torch.tensor([0.7, 1.0, 1.3])
    k = torch.full((3,), top_k)
    p_ = torch.full((3,), top_p)
    m = torch.full((3,), min_p)
    got = filtered_probs(logits, temps, k, p_, m)
    for b in range(3):
        for i in range(4):
            base = torch.softmax(logits[b, i].double() / float(temps[b]), -1)
            want = _filtered_reference(base, top_k, top_p, min_p)
            assert torch.allclose(got[b, i].double(), want, atol=1e-6), (b, i, got[b, i], want)
    # Filters off: plain softmax.
    assert torch.allclose(filtered_probs(logits, temps), torch.softmax(logits / temps.view(3, 1, 1), -1), atol=1e-6)


def test_sampled_walk_with_top_p_emits_the_filtered_target_distribution():
    """Lossless under top-p too: the first emitted token follows the *filtered* root distribution
    whatever the drafts are; a token the filter removes is never emitted."""
    n = 20000
    # The draft proposes token 1, which top-p removes at the root.
    _, acc = _sampled_one_child_walk(1, [0.6, 0.1, 0.3], [0.2, 0.3, 0.5], n, seed=7, top_p=torch.full((n,), 0.7))
    freq = torch.bincount(acc.new_tokens[:, 0], minlength=3).float() / n
    # top-p 0.7 at the root keeps 0.6 (mass before 0) and 0.3 (mass before 0.6), drops 0.1.
    assert torch.allclose(freq, torch.tensor([2 / 3, 0.0, 1 / 3]), atol=0.015)
    assert int((acc.accept_len > 0).sum()) == 0
