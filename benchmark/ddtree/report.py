"""Report over the two halves of the Qwen3.6-27B question (issue: benchmarks at Qwen3.6-27B
scale, item 4): step cost measured at full size on a GPU (``step_cost.py``: ms per decode step
per configuration and concurrency, random weights) and acceptance measured with models we can
run (``accept_sweep.py``: tokens per target forward per configuration). Neither alone answers
"how much faster"; their quotient does, *as a projection*, and is labelled so:

    projected tokens/s per request = tokens per forward (acceptance source) / ms per step (GPU) * 1000

Writes a markdown report (tables: step cost with the weight-read floor, acceptance, projected
tokens/s and the DDTREE / DFLASH ratio per concurrency) and a PNG (tokens/s vs budget per
concurrency, the ratio, and the accept-length histograms).

    python benchmark/ddtree/report.py --step-cost results/.../step_cost.json [--step-cost-log sc.log] \\
        --accept results/.../accept-sweep.json --out benchmark/ddtree/results/report
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from step_cost import base_config, config_budget

from sglang_ddtree.core.budget_choice import CHAIN, CHAIN_MARGIN, StepCostTable, best_choice, candidates_at

CONFIG_ORDER = ("no-spec", "DFLASH")


# Configurations whose acceptance is another's by construction: DDTREE-chain verifies the rank-0
# draft of every depth, which is exactly the DFLASH chain (greedy). DDTREE-auto has none (a mix
# of choices per step): it gets step costs only.
SAME_ACCEPTANCE = {"DDTREE-chain": "DFLASH"}


def _config_key(cfg: str) -> Tuple[int, int]:
    if cfg in CONFIG_ORDER:
        return (CONFIG_ORDER.index(cfg), 0)
    if cfg == "DDTREE-chain":
        return (len(CONFIG_ORDER), 0)
    if config_budget(cfg) is not None:
        return (len(CONFIG_ORDER) + 1, config_budget(cfg))
    return (len(CONFIG_ORDER) + 2, 0)


def load_step_cost(paths: List[Path], logs: List[Path],
                   spread: Optional[Dict[Tuple[str, int], Tuple[int, float]]] = None
                   ) -> Tuple[dict, Dict[Tuple[str, int], float]]:
    """``(meta, {(config, concurrency): ms_per_step})`` from step_cost JSONs and, for rows whose
    process was stopped before writing, the ``[step_cost] {...}`` lines of its log. A
    configuration measured in several engines (``CONFIG@N`` repeats, or the same configuration in
    several tables, e.g. the chain as the anchor of a sweep run in parts) gets the mean of its
    engines; ``spread``, when given, receives ``(engines, (max - min) / mean)`` for those."""
    meta: dict = {}
    samples: Dict[Tuple[str, int], List[float]] = {}
    seen = set()
    for p in paths:
        d = json.loads(Path(p).read_text())
        rows = d["rows"] if isinstance(d, dict) else d
        if isinstance(d, dict):
            meta.update(d.get("meta", {}))
        for r in rows:
            ident = json.dumps(r, sort_keys=True)  # a table and its per-configuration file share rows
            if ident in seen:
                continue
            seen.add(ident)
            samples.setdefault((base_config(r["config"]), int(r["concurrency"])), []).append(float(r["ms_per_step"]))
    for p in logs:
        for line in Path(p).read_text(errors="replace").splitlines():
            m = re.search(r"\[step_cost\] (\{.*\})", line)
            if m:
                r = json.loads(m.group(1))
                samples.setdefault((base_config(r["config"]), int(r["concurrency"])), [float(r["ms_per_step"])])
    ms = {k: sum(v) / len(v) for k, v in samples.items()}
    if spread is not None:
        spread.update({k: (len(v), (max(v) - min(v)) / ms[k]) for k, v in samples.items() if len(v) > 1})
    return meta, ms


def load_accept(path: Path) -> Tuple[dict, Dict[str, float], Dict[str, List[int]]]:
    """``(meta, {config: tokens per forward over all sets}, {config: accept histogram})``."""
    d = json.loads(Path(path).read_text())
    tpf, hist = {}, {}
    for cfg, rec in d["rows"].items():
        toks = sum(s["completion_tokens"] for s in rec["sets"].values())
        steps = sum(s["verify_steps"] for s in rec["sets"].values())
        # No speculation: one token per forward by definition (verify_steps is 0 there).
        tpf[cfg] = toks / steps if steps else 1.0
        h: List[int] = []
        for s in rec["sets"].values():
            for i, c in enumerate(s.get("accept_histogram") or []):
                h.extend([0] * (i + 1 - len(h)))
                h[i] += c
        if h:
            hist[cfg] = h
    return d.get("meta", {}), tpf, hist


# The ratio's reference per concurrency: DFLASH where its step cost was measured, else the chain
# through DDTREE's worker (the same drafts as DFLASH, its step cost through our verify path).
REFERENCES = ("DFLASH", "DDTREE-chain")


def _reference(rows: Dict[Tuple[str, int], object], c: int) -> Optional[str]:
    """The ratio's reference among ``rows`` (keyed ``(config, concurrency)``) at concurrency ``c``."""
    return next((x for x in REFERENCES if (x, c) in rows), None)


def project(ms: Dict[Tuple[str, int], float], tpf: Dict[str, float]) -> Dict[Tuple[str, int], dict]:
    """Projected tokens/s per request and the ratio to the reference at the same concurrency
    (``vs_ref`` names it; ``vs_dflash`` is the ratio when the reference is DFLASH)."""
    out = {}
    for (cfg, c), m in ms.items():
        acc = cfg if cfg in tpf else SAME_ACCEPTANCE.get(cfg)
        if acc not in tpf:
            continue
        out[(cfg, c)] = {"tokens_per_s": tpf[acc] / m * 1e3}
    for (cfg, c), r in out.items():
        ref = _reference(out, c)
        if ref is not None:
            r["vs"], r["vs_ref"] = r["tokens_per_s"] / out[(ref, c)]["tokens_per_s"], ref
            if ref == "DFLASH":
                r["vs_dflash"] = r["vs"]
    return out


def auto_choices(ms: Dict[Tuple[str, int], float], tpf: Dict[str, float]) -> Dict[int, dict]:
    """Per concurrency, what ``--speculative-ddtree-budget auto`` settles on with this acceptance
    and these step costs (``core/budget_choice.best_choice`` over its candidates at that batch
    size, the profile known: no exploration or refresh steps) and its projected tokens/s beside
    the best fixed choice's, among the candidates whose acceptance the profile has (``unknown``
    lists the others)."""
    table = StepCostTable.from_rows([dict(config=cfg, concurrency=c, ms_per_step=m) for (cfg, c), m in ms.items()
                                     if cfg == "DDTREE-chain" or config_budget(cfg) is not None])
    if not table.budgets():
        return {}
    name = lambda ch: f"DDTREE-{ch}"  # noqa: E731  (the table's row name; the chain's is DDTREE-chain)
    acc = lambda ch: tpf.get(name(ch), tpf.get(SAME_ACCEPTANCE.get(name(ch), "")))  # noqa: E731
    out = {}
    for c in sorted({c for _, c in ms}):
        every = candidates_at(table, table.budgets(), table.has_chain(), c)
        cands = [ch for ch in every if acc(ch) is not None]
        if not any(ch != CHAIN for ch in cands):
            continue
        pick = best_choice(table, {ch: acc(ch) - 1.0 for ch in cands}, c, cands, CHAIN_MARGIN)
        tps = {ch: acc(ch) / table.cost(ch, c) * 1e3 for ch in cands}
        best = max(tps, key=tps.get)
        out[c] = dict(choice=name(pick), tokens_per_s=tps[pick], best_fixed=name(best),
                      best_tokens_per_s=tps[best], vs_best=tps[pick] / tps[best],
                      unknown=[name(ch) for ch in every if ch not in cands])
    return out


def break_even(ms: Dict[Tuple[str, int], float]) -> Dict[Tuple[str, int], dict]:
    """Per DDTREE budget and concurrency, the tokens per step a tree must commit, relative to the
    chain's, to match the reference (DFLASH at that concurrency, else the DDTREE chain; both
    commit the chain's drafts): ``ms(budget) / ms(reference)``. Step costs only, no acceptance
    assumed: the number to hold a drafter's measured tree / chain acceptance against."""
    out = {}
    for (cfg, c), m in ms.items():
        if config_budget(cfg) is None:
            continue
        ref = _reference(ms, c)
        if ref is not None:
            out[(cfg, c)] = {"ratio": m / ms[(ref, c)], "ref": ref}
    return out


def _table(header: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render(sc_meta: dict, ms: dict, acc_meta: dict, tpf: dict, proj: dict,
           spread: Optional[Dict[Tuple[str, int], Tuple[int, float]]] = None,
           even: Optional[Dict[Tuple[str, int], dict]] = None, auto: Optional[Dict[int, dict]] = None) -> str:
    concs = sorted({c for _, c in ms})
    cfgs = sorted({cfg for cfg, _ in ms} | set(tpf), key=_config_key)
    fmt = lambda x, f="{:.1f}": f.format(x) if x is not None else "—"  # noqa: E731
    parts = ["## Step cost, acceptance and projected speed", ""]
    parts.append(f"Step cost: {sc_meta.get('device', '?')}, target {sc_meta.get('target', '?')}, "
                 f"prompt {sc_meta.get('prompt_len', '?')} tokens, random weights (every step commits ~1 "
                 f"token). Weight-read floor of the target: {fmt(sc_meta.get('floor_ms_target'), '{:.2f}')} ms.")
    parts.append(f"Acceptance: {acc_meta.get('target', '?')} with {acc_meta.get('drafter', '?')} on "
                 f"{', '.join(acc_meta.get('sets', []))} (greedy).")
    parts.append("**Projected** tokens/s combine the two; they are not a measurement of either model.\n")
    spread = spread or {}

    def cost_cell(cfg: str, c: int) -> str:
        cell = fmt(ms.get((cfg, c)), "{:.2f}")
        if (cfg, c) in spread:  # the mean of several engines, and how far apart they were
            n, sp = spread[(cfg, c)]
            cell += f" ({n} engines, spread {sp:.1%})"
        return cell

    parts.append(_table(["config"] + [f"ms/step, conc {c}" for c in concs],
                        [[cfg] + [cost_cell(cfg, c) for c in concs] for cfg in cfgs]))
    parts.append("")
    parts.append(_table(["config", "tokens per target forward"], [
        [cfg, fmt(tpf.get(cfg), "{:.3f}") if cfg in tpf or cfg not in SAME_ACCEPTANCE
         else f"{fmt(tpf.get(SAME_ACCEPTANCE[cfg]), '{:.3f}')} ({SAME_ACCEPTANCE[cfg]}'s: same drafts)"] for cfg in cfgs]))
    parts.append("")
    rows = []
    for cfg in cfgs:
        row = [cfg]
        for c in concs:
            p = proj.get((cfg, c))
            row.append("—" if p is None else f"{p['tokens_per_s']:.1f}" + (
                f" ({p['vs']:.2f}x)" if "vs" in p else ""))
        rows.append(row)
    refs = {c: _reference(proj, c) for c in concs}
    parts.append(_table(["config"] + [f"projected tok/s per request, conc {c}" + (f" (vs {refs[c]})" if refs[c] else "")
                                      for c in concs], rows))
    parts.append("")
    if even:
        budgets = sorted({cfg for cfg, _ in even}, key=_config_key)
        parts.append("Break-even acceptance (step costs only): the tree's tokens per step over the chain's at which "
                     "the budget matches the reference's speed (DFLASH, else the DDTREE chain):\n")
        parts.append(_table(["config"] + [f"conc {c}" for c in concs], [
            [cfg] + [fmt(even.get((cfg, c), {}).get("ratio"), "{:.2f}") + (
                f" (vs {even[(cfg, c)]['ref']})" if (cfg, c) in even and even[(cfg, c)]["ref"] != "DFLASH" else "")
                for c in concs] for cfg in budgets]))
        parts.append("")
    if auto:
        parts.append("Budget auto on this acceptance (**projected**: the policy's choice with the profile known, "
                     "`core/budget_choice.best_choice`, chain margin included; no exploration or refresh steps):\n")
        parts.append(_table(["conc", "auto's choice", "projected tok/s", "best fixed", "its tok/s", "auto / best",
                             "left out (no acceptance)"], [
            [str(c), a["choice"], f"{a['tokens_per_s']:.1f}", a["best_fixed"], f"{a['best_tokens_per_s']:.1f}",
             f"{a['vs_best']:.3f}", ", ".join(a["unknown"]) or "—"] for c, a in auto.items()]))
        parts.append("")
    return "\n".join(parts)


def plot(ms: dict, proj: dict, hist: dict, png: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    concs = sorted({c for _, c in ms})
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for c in concs:
        ref = _reference(proj, c)
        pts = sorted((config_budget(cfg), p["tokens_per_s"]) for (cfg, cc), p in proj.items()
                     if cc == c and config_budget(cfg) is not None)
        if pts:
            line = ax[0].plot(*zip(*pts), marker="o", label=f"DDTREE, conc {c}")[0]
            if ref is not None:
                ax[0].axhline(proj[(ref, c)]["tokens_per_s"], ls="--", color=line.get_color(),
                              label=f"{ref}, conc {c}")
        rpts = sorted((config_budget(cfg), p["vs"]) for (cfg, cc), p in proj.items()
                      if cc == c and config_budget(cfg) is not None and "vs" in p)
        if rpts:
            ax[1].plot(*zip(*rpts), marker="o", label=f"conc {c} (vs {ref})")
    ax[0].set(xscale="log", xlabel="DDTREE budget", ylabel="projected tokens/s per request", title="speed")
    ax[1].axhline(1.0, color="grey", lw=0.8)
    ax[1].set(xscale="log", xlabel="DDTREE budget", ylabel="DDTREE / reference (DFLASH, else the chain)",
              title="ratio (projected)")
    for cfg, h in sorted(hist.items(), key=lambda kv: _config_key(kv[0])):
        tot = sum(h) or 1
        ax[2].plot(range(len(h)), [x / tot for x in h], marker=".", label=cfg)
    ax[2].set(xlabel="accepted drafts per step", ylabel="fraction of steps", title="accept-length histogram")
    for a in ax:
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-cost", type=Path, nargs="+", required=True)
    ap.add_argument("--step-cost-log", type=Path, nargs="*", default=[])
    ap.add_argument("--accept", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="path stem: .md, .json and .png are written")
    a = ap.parse_args(argv)
    spread: Dict[Tuple[str, int], Tuple[int, float]] = {}
    sc_meta, ms = load_step_cost(a.step_cost, a.step_cost_log, spread)
    acc_meta, tpf, hist = load_accept(a.accept)
    proj = project(ms, tpf)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    even, auto = break_even(ms), auto_choices(ms, tpf)
    a.out.with_suffix(".md").write_text(render(sc_meta, ms, acc_meta, tpf, proj, spread, even, auto))
    a.out.with_suffix(".json").write_text(json.dumps({
        "step_cost_meta": sc_meta, "accept_meta": acc_meta,
        "rows": [dict(config=cfg, concurrency=c, ms_per_step=ms[(cfg, c)], tokens_per_forward=tpf.get(cfg), **p)
                 for (cfg, c), p in sorted(proj.items(), key=lambda kv: (_config_key(kv[0][0]), kv[0][1]))],
        "auto_projected": {str(c): v for c, v in auto.items()},
        "break_even": [dict(config=cfg, concurrency=c, **v) for (cfg, c), v in sorted(
            even.items(), key=lambda kv: (_config_key(kv[0][0]), kv[0][1]))],
    }, indent=1))
    if plot(ms, proj, hist, a.out.with_suffix(".png")):
        print(f"[report] {a.out.with_suffix('.png')}")
    print(a.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
