"""Shadow DFLASH-chain accept length from a DDTREE step, against a direct simulation of the
chain (walk the rank-0 candidates while they match the target)."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from sglang_ddtree.core.accept import tree_walk
from sglang_ddtree.core.shadow_chain import shadow_chain_accept

from random_trees import shadow_case


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
    lp, ids, tree, lay, target, rank = shadow_case(seed, bs, L, K, B, vocab=6)
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
