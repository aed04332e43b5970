"""Issue 7's check of ``--speculative-ddtree-budget auto``: is it ever slower than the better of
the chain and every fixed budget, by more than noise? From ``step_cost.py`` tables, per
concurrency:

- cost of a configuration = ms per decode step / tokens committed per step (ms per token of a
  request; with random weights every configuration commits ~1 token a step, so it is the step);
- the best fixed choice = the cheapest of ``DDTREE-chain`` and the ``DDTREE-<budget>`` rows;
- noise = the larger of the spread of the timed rounds inside each compared engine
  (``ms_per_step_rounds``: (max - min) / median) and the spread between engines of one
  configuration (rows ``CONFIG`` and ``CONFIG@N``, step_cost's repeats: (max - min) / mean, the
  largest over every repeated configuration). Without repeats the between-engine spread is
  unknown and the verdict says so instead of calling a gap noise.

A configuration with repeats counts at the mean of its engines.

    python benchmark/ddtree/auto_verdict.py results/.../step_cost.json [more.json ...] [--out verdict.md]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Dict, List, Optional

from step_cost import base_config, config_budget, table_rows

AUTO = "DDTREE-auto"


def _fixed(cfg: str) -> bool:
    return cfg == "DDTREE-chain" or config_budget(cfg) is not None


def _cost(row: dict) -> float:
    return float(row["ms_per_step"]) / max(float(row.get("tokens_per_step") or 1.0), 1e-9)


def _round_spread(row: dict) -> float:
    rounds = row.get("ms_per_step_rounds") or []
    return (max(rounds) - min(rounds)) / statistics.median(rounds) if len(rounds) > 1 else 0.0


def load_rows(paths: List[Path]) -> List[dict]:
    """Rows of step_cost tables (``{"meta", "rows"}``) or of its per-configuration files (lists)."""
    return [r for p in paths for r in table_rows(p)]


def verdicts(rows: List[dict]) -> List[dict]:
    """One verdict per concurrency that has an auto row and at least one fixed choice."""
    by_conc: Dict[int, Dict[str, List[dict]]] = {}
    for r in rows:
        by_conc.setdefault(int(r["concurrency"]), {}).setdefault(base_config(r["config"]), []).append(r)
    out = []
    for c in sorted(by_conc):
        groups = by_conc[c]
        if AUTO not in groups:
            continue
        costs = {cfg: statistics.mean(_cost(r) for r in rs) for cfg, rs in groups.items()}
        fixed = {cfg: v for cfg, v in costs.items() if _fixed(cfg)}
        if not fixed:
            continue
        best = min(fixed, key=fixed.get)
        within = max(_round_spread(r) for r in groups[AUTO] + groups[best])
        repeated = {cfg: [_cost(r) for r in rs] for cfg, rs in groups.items() if len(rs) > 1}
        between = (max((max(v) - min(v)) / statistics.mean(v) for v in repeated.values()) if repeated else None)
        noise = max(within, between or 0.0)
        gap = costs[AUTO] / fixed[best] - 1.0
        if gap <= 0:
            verdict = "not slower"
        elif between is None:
            verdict = (f"slower by {gap:.1%}; rounds spread {within:.1%}; between-engine spread not measured "
                       "(no CONFIG@N repeats): no verdict on noise")
        elif gap <= noise:
            verdict = f"within noise ({gap:.1%} <= {noise:.1%})"
        else:
            verdict = f"slower by {gap:.1%}, beyond the noise {noise:.1%}"
        out.append(dict(concurrency=c, auto_ms_per_token=round(costs[AUTO], 3), best=best,
                        best_ms_per_token=round(fixed[best], 3), gap=round(gap, 4), rounds_spread=round(within, 4),
                        between_engines_spread=None if between is None else round(between, 4),
                        repeated=sorted(repeated), verdict=verdict))
    return out


def render(vs: List[dict]) -> str:
    lines = ["| conc | auto ms/token | best fixed | its ms/token | gap | rounds spread | between engines | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for v in vs:
        between = "—" if v["between_engines_spread"] is None else f"{v['between_engines_spread']:.1%}"
        lines.append(f"| {v['concurrency']} | {v['auto_ms_per_token']} | {v['best']} | {v['best_ms_per_token']} | "
                     f"{v['gap']:+.1%} | {v['rounds_spread']:.1%} | {between} | {v['verdict']} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", type=Path, nargs="+", help="step_cost.py outputs (tables or per-configuration files)")
    ap.add_argument("--out", type=Path, help="also write the markdown table here")
    a = ap.parse_args(argv)
    vs = verdicts(load_rows(a.tables))
    if not vs:
        raise SystemExit("auto_verdict.py: no concurrency has both a DDTREE-auto row and a fixed choice")
    text = render(vs)
    print(text, end="")
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
