"""Shadow DFLASH-chain accept length from a DDTREE step, against a direct simulation of the
chain (walk the rank-0 candidates while they match the target)."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from sglang_ddtree.core.accept import tree_walk
from sglang_ddtree.core.shadow_chain import shadow_chain_accept
from sglang_ddtree.core.tree_builder import build_tree
from sglang_ddtree.core.verify_layout import build_verify_layout


def _case(seed, bs, L, K, B, vocab):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(bs, L, K, generator=g).sort(-1, descending=True).values.log_softmax(-1)
    # Distinct ids per depth (as top-K gives), from a small vocabulary so matches happen.
    ids = torch.stack([torch.stack([torch.randperm(vocab, generator=g)[:K] for _ in range(L)]) for _ in range(bs)])
    tree = build_tree(lp, ids, B, None, L)
    lay = build_verify_layout(tree, torch.zeros(bs, dtype=torch.long), torch.full((bs,), 10), L)
    n = lay.tokens.shape[1]
    # Target tokens: mostly follow the chain (rank 0 of the next depth), sometimes rank 1, sometimes junk.
    target = torch.empty(bs, n, dtype=torch.long)
    for b in range(bs):
        for i in range(n):
            d = int(lay.depth[b, i])
            if d >= L:
                target[b, i] = vocab + 1
                continue
            r = torch.rand((), generator=g)
            alt = ids[b, d, 1] if K > 1 else vocab + 1
            target[b, i] = ids[b, d, 0] if r < 0.7 else (alt if r < 0.85 else vocab + 1)
    rank = torch.cat([torch.zeros(bs, 1, dtype=torch.long), tree.rank], 1)
    return lp, ids, tree, lay, target, rank


def _chain_truth(ids, lay, target, b, L):
    """The chain's own walk: depth d's rank-0 token must equal the target at the chain node
    of depth d-1; the target there is known only if that chain node is in the tree."""
    node, acc = 0, 0
    for d in range(1, L + 1):
        want = int(target[b, node])
        if int(ids[b, d - 1, 0]) != want:
            return acc, False
        child = [i for i in range(lay.tokens.shape[1]) if int(lay.parent[b, i]) == node and int(lay.tokens[b, i]) == want]
        acc += 1
        if not child:
            return acc, d < L  # matched, but the tree has no node to read the next target from
        node = child[0]
    return acc, False


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.integers(2, 6), st.integers(1, 4), st.integers(1, 40))
def test_shadow_chain_matches_direct_chain_walk(seed, bs, L, K, B):
    lp, ids, tree, lay, target, rank = _case(seed, bs, L, K, B, vocab=6)
    acc = tree_walk(lay.tokens, lay.parent, lay.depth, target, L)
    bonus = acc.new_tokens.gather(1, acc.accept_len.unsqueeze(1)).squeeze(1)
    run, censored = shadow_chain_accept(acc.accepted, acc.accept_len, rank, ids[:, :, 0], bonus, L)
    for b in range(bs):
        want, want_censored = _chain_truth(ids, lay, target, b, L)
        if want_censored:
            assert bool(censored[b]) and int(run[b]) == want
        else:
            assert not bool(censored[b]) and int(run[b]) == want, (b, int(run[b]), want)
        # The chain exceeds the tree only where the budget left the chain's next node out.
        assert int(run[b]) <= int(acc.accept_len[b]) + int(censored[b] or run[b] == acc.accept_len[b] + 1)
