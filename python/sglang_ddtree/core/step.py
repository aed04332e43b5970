"""One DDTree decode step's tensor program, end to end, for benchmarks and graph capture.

``draft_to_verify`` turns draft logits into the verify layout; ``verify_to_commit`` turns the
target's per-node tokens into acceptance, truncation and the commit plan. Both are fixed-shape
and host-sync free, so each can be captured in one CUDA graph.
"""

from __future__ import annotations

from typing import Optional

import torch

from .accept import Acceptance, tree_walk, truncate_new_tokens
from .commit_plan import CommitPlan, build_commit_plan
from .topk import depth_topk
from .tree_builder import DraftTree, build_tree
from .verify_layout import VerifyLayout, build_verify_layout


def draft_to_verify(
    draft_logits: torch.Tensor,
    root_tokens: torch.Tensor,
    prefix_lens: torch.Tensor,
    budget: int,
    topk: int,
    max_siblings: Optional[int] = None,
    max_depth: Optional[int] = None,
) -> tuple[DraftTree, VerifyLayout]:
    """``draft_logits [bs, L, V]`` -> tree ``[bs, B]`` and layout ``[bs, B+1]``."""
    lp, ids = depth_topk(draft_logits, topk)
    return draft_tree_to_verify(lp, ids, root_tokens, prefix_lens, budget, max_siblings, max_depth)


def draft_tree_to_verify(lp, ids, root_tokens, prefix_lens, budget, max_siblings=None, max_depth=None):
    tree = build_tree(lp, ids, budget, max_siblings, max_depth)
    layout = build_verify_layout(tree, root_tokens, prefix_lens, lp.shape[1])
    return tree, layout


def verify_to_commit(
    layout: VerifyLayout,
    target: torch.Tensor,
    max_depth: int,
    stop_ids: Optional[torch.Tensor],
    remaining: torch.Tensor,
    verify_slots: torch.Tensor,
) -> tuple[Acceptance, torch.Tensor, torch.Tensor, CommitPlan]:
    """Target tokens ``[bs, B+1]`` -> acceptance, (num_commit, finished), commit plan."""
    acc = tree_walk(layout.tokens, layout.parent, layout.depth, target, max_depth)
    num_commit, finished = truncate_new_tokens(acc.new_tokens, acc.num_new, stop_ids, remaining)
    # KV kept: the root plus the committed path nodes. The bonus token (the last new token
    # when nothing is truncated) has no KV yet: it is the next step's root.
    keep_nodes = torch.minimum(num_commit, acc.accept_len) + 1
    plan = build_commit_plan(acc.accepted, keep_nodes, verify_slots)
    return acc, num_commit, finished, plan
