"""Random draft trees for the core tests (log-probs sorted per depth, distinct token ids)."""

from __future__ import annotations

import torch

from sglang_ddtree.core.tree_builder import build_tree


def random_trees(seed, bs, L, K, B):
    g = torch.Generator().manual_seed(seed)
    lp = torch.sort(torch.log_softmax(torch.randn(bs, L, 50, generator=g), -1), -1, descending=True).values[..., :K]
    ids = torch.stack([torch.randperm(50, generator=g)[:K] for _ in range(bs * L)]).view(bs, L, K)
    return build_tree(lp, ids, B)
