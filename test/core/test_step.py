"""core/step.py draft_to_verify: with the CUDA tree builder (exactly budget + 1 positions) and a
verify width padded up to the draft block (budget 8, block 16), the step's tree and layout equal
the torch path's (which builds the padded tree first)."""

from __future__ import annotations

import torch

from sglang_ddtree.core.tree_builder import build_tree
from sglang_ddtree.core.verify_layout import build_verify_layout
from sglang_ddtree.core.step import draft_to_verify


class _TorchAsCuda:
    """kernels/tree_cuda.build_tree_and_layout's contract (``budget`` nodes, ``budget + 1``
    positions), computed with the torch builder: the CUDA kernel equals it (test/kernels/test_tree_cuda.py)."""

    calls = 0

    def build_tree_and_layout(self, lp, ids, root, prefix, budget, max_siblings=None, max_depth=None):
        type(self).calls += 1
        tree = build_tree(lp, ids, budget, max_siblings, max_depth)
        return tree, build_verify_layout(tree, root, prefix, lp.shape[1])


def test_cuda_built_tree_is_padded_to_the_verify_width():
    g = torch.Generator().manual_seed(0)
    bs, L, K, budget, width = 3, 15, 8, 8, 16
    lp = torch.sort(torch.log_softmax(torch.randn(bs, L, 64, generator=g), -1), -1, descending=True).values[..., :K]
    ids = torch.stack([torch.randperm(64, generator=g)[:K] for _ in range(bs * L)]).view(bs, L, K)
    root, prefix = torch.tensor([5, 6, 7]), torch.tensor([10, 0, 33])
    fast = _TorchAsCuda()
    t_tree, t_lay = draft_to_verify(lp, ids, root, prefix, budget, width, max_depth=15)
    c_tree, c_lay = draft_to_verify(lp, ids, root, prefix, budget, width, max_depth=15, fast=fast)
    assert _TorchAsCuda.calls == 1 and c_lay.tokens.shape == (bs, width)
    for f in ("depth", "parent", "rank", "token", "score"):
        assert torch.equal(getattr(c_tree, f), getattr(t_tree, f)), f
    for f in ("tokens", "depth", "positions", "parent", "ancestor_mask", "first_child", "next_sibling", "retrieve_index"):
        assert torch.equal(getattr(c_lay, f), getattr(t_lay, f)), f
    # Unpadded widths go through unchanged.
    c_tree, c_lay = draft_to_verify(lp, ids, root, prefix, 20, 21, max_depth=15, fast=fast)
    assert c_lay.tokens.shape == (bs, 21) and c_tree.depth.shape == (bs, 20)
