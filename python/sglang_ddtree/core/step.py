"""One DDTREE decode step's tensor program, as the worker runs it.

``draft_to_verify``: per-depth top-K -> best-first tree -> verify layout, padded to the step's
verify width. ``verify_to_commit``: the target's token at every verify position -> the tree walk
-> the KV commit plan. Both are fixed-shape and free of host synchronisation.

``fast``: the CUDA tree kernels (``kernels.tree_cuda``: one launch builds the tree and its
layout, one walks it), or None for the torch implementations they are tested against.
"""

from __future__ import annotations

from typing import Optional

import torch

from .accept import Acceptance, tree_walk
from .commit_plan import CommitPlan, build_commit_plan
from .tree_builder import DraftTree, build_tree, pad_tree
from .verify_layout import VerifyLayout, build_verify_layout, pad_layout


def draft_to_verify(lp: torch.Tensor, ids: torch.Tensor, root_tokens: torch.Tensor, prefix_lens: torch.Tensor,
                    budget: int, width: int, max_siblings: Optional[int] = None, max_depth: Optional[int] = None,
                    fast=None) -> tuple[DraftTree, VerifyLayout]:
    """``lp, ids [bs, L, K]`` (log-probs sorted descending per depth, token ids), ``root_tokens
    [bs]`` (the bonus tokens), ``prefix_lens [bs]`` -> tree ``[bs, width - 1]`` and layout
    ``[bs, width]`` (``width >= budget + 1``; positions past the tree are padding: they attend to
    the prefix and themselves only and never match). ``max_depth``: deepest level (default L)."""
    L = lp.shape[1] if max_depth is None else min(int(max_depth), lp.shape[1])
    if fast is not None:
        tree, layout = fast.build_tree_and_layout(lp, ids, root_tokens, prefix_lens, budget, max_siblings, L)
        return pad_tree(tree, width - 1), pad_layout(layout, width)
    tree = pad_tree(build_tree(lp, ids, budget, max_siblings, L), width - 1)
    return tree, build_verify_layout(tree, root_tokens, prefix_lens, lp.shape[1])


def verify_to_commit(layout: VerifyLayout, target: torch.Tensor, max_depth: int, window: torch.Tensor,
                     fast=None, move_kv: bool = False) -> tuple[Acceptance, CommitPlan]:
    """``target [bs, W]``: the target's argmax (T = 0) or its sample (T > 0) at every verify
    position; ``window [bs, W]``: the KV slots the verify wrote. ``max_depth``: the draft's
    depth L (bounds the path). ``move_kv``: commit by moving the path's KV (page size > 1,
    ``commit_plan``) instead of permuting the window."""
    if fast is not None:
        acc = fast.tree_walk(layout, target, max_depth)
    else:
        acc = tree_walk(layout.tokens, layout.parent, layout.depth, target, max_depth)
    return acc, build_commit_plan(acc, window, move_kv)
