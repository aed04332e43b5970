"""Random draft trees for the core tests (log-probs sorted per depth, distinct token ids)."""

from __future__ import annotations

import torch

from sglang_ddtree.core.tree_builder import build_tree
from sglang_ddtree.core.verify_layout import build_verify_layout


def random_trees(seed, bs, L, K, B):
    g = torch.Generator().manual_seed(seed)
    lp = torch.sort(torch.log_softmax(torch.randn(bs, L, 50, generator=g), -1), -1, descending=True).values[..., :K]
    ids = torch.stack([torch.randperm(50, generator=g)[:K] for _ in range(bs * L)]).view(bs, L, K)
    return build_tree(lp, ids, B)


def shadow_case(seed, bs, L, K, B, vocab):
    """A step of a random tree over a small vocabulary and targets that mostly follow the chain
    (rank 0 of the next depth), sometimes rank 1, sometimes no draft: ``(lp, ids, tree, layout,
    target [bs, n], node_rank [bs, n] (root: 0))``."""
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
