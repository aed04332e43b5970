"""Verify widths and the batch sizes their graphs are captured for. Pure python, no torch.

A DDTREE verify lays out ``W = max(budget + 1, block_size)`` positions per request: the tree,
its root, and at least one draft block (the draft forward writes ``block_size`` slots of the
same KV window). With ``--speculative-ddtree-budget auto`` every budget the step-cost table
lists, and the chain, is a verify width of its own; a width's CUDA graphs are needed only up to
the largest batch size the policy can choose it at (``budget_choice.candidates_at``).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from .budget_choice import StepCostTable, furthest_budget

# width -> the largest batch size budget auto can choose it at (None: any)
WidthCaps = Dict[int, Optional[int]]


def verify_width(budget: int, block_size: int) -> int:
    """Verify positions per request for a tree of ``budget`` nodes and a drafter block."""
    return max(int(budget) + 1, int(block_size))


def policy_width_caps(table: StepCostTable, max_depth: int, block_size: int) -> WidthCaps:
    """Per verify width budget auto can choose, the largest batch size it can choose it at: a
    budget up to the largest concurrency its row was measured at, the chain (verify width of a
    ``max_depth`` chain) at any batch size; without a chain row the budget measured furthest at
    any. A width shared by several choices takes the largest cap."""
    caps: WidthCaps = {}

    def widen(width: int, cap: Optional[int]) -> None:
        old = caps.get(width, 0)
        caps[width] = None if cap is None or old is None else max(old, cap)

    budgets = table.budgets()
    for b in budgets:
        widen(verify_width(b, block_size), int(table.max_concurrency(b)))
    if table.has_chain():
        widen(verify_width(max_depth, block_size), None)
    elif budgets:
        widen(verify_width(furthest_budget(table, budgets), block_size), None)
    return dict(sorted(caps.items()))


def capture_bs_for_cap(bs_list: Iterable[int], cap: Optional[int]) -> List[int]:
    """The decode-graph batch sizes of a width chosen for at most ``cap`` requests: every size
    below ``cap`` and the smallest at or above it (a batch between two sizes pads to the larger);
    all of them without a cap, or when none reaches it."""
    sizes = sorted({int(b) for b in bs_list})
    if cap is None:
        return sizes
    above = [b for b in sizes if b >= cap]
    return [b for b in sizes if b < cap] + above[:1]


def largest_capture_bs(bs_list: Iterable[int], caps: WidthCaps) -> Dict[int, int]:
    """Per width in ``caps``, the largest batch size its graphs are captured for."""
    return {w: max(capture_bs_for_cap(bs_list, cap)) for w, cap in caps.items()}


def max_verify_rows(bs_list: Iterable[int], caps: WidthCaps) -> int:
    """The most verify positions (requests x width) any width's graphs use."""
    return max(w * bs for w, bs in largest_capture_bs(bs_list, caps).items())
