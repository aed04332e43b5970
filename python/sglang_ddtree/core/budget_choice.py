"""The step-cost table and the choice rule of ``--speculative-ddtree-budget auto``: which
candidates a batch size allows and which of them gives the most expected tokens per ms
(``core/budget_policy.py`` runs it every step with the running acceptance profile; the report
projects it on a measured profile). Pure python, no torch.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Union

CHAIN = "chain"
Choice = Union[int, str]  # a DDTREE budget, or CHAIN
# A tree must beat the chain's tokens per ms by more than this share (budget_policy's docstring).
CHAIN_MARGIN = 0.02


@dataclass
class StepCostTable:
    """ms per step: ``ms[config][concurrency]``, configs ``"DDTREE-<budget>"`` and ``"DDTREE-chain"``."""

    ms: Dict[str, Dict[int, float]]

    @classmethod
    def from_rows(cls, rows: Sequence[dict]) -> "StepCostTable":
        ms: Dict[str, Dict[int, float]] = {}
        for r in rows:
            ms.setdefault(str(r["config"]), {})[int(r["concurrency"])] = float(r["ms_per_step"])
        return cls(ms)

    @classmethod
    def from_json(cls, path: Union[str, Path]) -> "StepCostTable":
        d = json.loads(Path(path).read_text())
        return cls.from_rows(d["rows"] if isinstance(d, dict) else d)

    def budgets(self) -> List[int]:
        return sorted(int(c.split("-", 1)[1]) for c in self.ms
                      if c.startswith("DDTREE-") and c.split("-", 1)[1].isdigit())

    def has_chain(self) -> bool:
        return "DDTREE-chain" in self.ms

    def max_concurrency(self, choice: Choice) -> int:
        """The largest concurrency ``choice`` was measured at."""
        return max(self.ms[f"DDTREE-{choice}"])

    def cost(self, choice: Choice, bs: int) -> float:
        """ms per step at batch size ``bs``: linear between measured concurrencies, flat
        outside them."""
        pts = sorted(self.ms[f"DDTREE-{choice}"].items())
        xs = [c for c, _ in pts]
        if bs <= xs[0]:
            return pts[0][1]
        if bs >= xs[-1]:
            return pts[-1][1]
        i = bisect_left(xs, bs)
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        return y0 + (y1 - y0) * (bs - x0) / (x1 - x0)


def best_choice(table: StepCostTable, expected: Dict[Choice, float], bs: int, candidates: Sequence[Choice],
                chain_margin: float = CHAIN_MARGIN) -> Choice:
    """The candidate with the most expected tokens per ms at batch size ``bs``, ``(expected[c] +
    1) / table.cost(c, bs)`` (``expected``: accepted drafts per request-step, known for every
    candidate); the chain unless the best tree beats it by more than ``chain_margin``. Of equal
    trees the smaller budget."""
    trees = [c for c in candidates if c != CHAIN]
    if not trees:
        return CHAIN
    value = {c: (expected[c] + 1.0) / table.cost(c, bs) for c in candidates}
    best = max(trees, key=value.get)  # max keeps the first of equals
    if CHAIN in value and value[best] <= (1.0 + chain_margin) * value[CHAIN]:
        return CHAIN
    return best


def candidates_at(table: StepCostTable, budgets: Sequence[int], chain: bool, bs: int) -> List[Choice]:
    """The candidates at batch size ``bs``: the chain (if ``chain``), and the ``budgets`` measured
    at ``bs`` requests or more. A budget's cost past its largest measured concurrency is unknown (a
    sweep caps the big budgets where they do not fit, and the table would otherwise read their
    cost flat from the last row, far too cheap); without the chain and with no budget measured
    that far, the budget measured at the most requests."""
    ok = [b for b in budgets if table.max_concurrency(b) >= bs]
    if not ok and not chain:
        ok = [furthest_budget(table, budgets)]
    return ([CHAIN] if chain else []) + ok


def furthest_budget(table: StepCostTable, budgets: Sequence[int]) -> int:
    """The budget measured at the most requests (of equals the smaller): without a chain row,
    the one candidate past every budget's rows."""
    return max(budgets, key=lambda b: (table.max_concurrency(b), -b))
