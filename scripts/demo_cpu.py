"""The main job on the embedded tiny default, on CPU through real sglang.

Runs the tiny Llama target without speculation, with the DFLASH chain and with DDTREE (the
tiny DFlash drafter), same prompts, greedy, and prints tokens/s, accept length and whether
the outputs are identical. The tiny drafter has random weights, so its accept length is ~1:
this shows the machinery and losslessness, not speed (a trained tiny drafter is issue 9).

    bash scripts/setup_env.sh && .venv/bin/python scripts/demo_cpu.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "test" / "harness"  # CPU stand-in for sgl_kernel (no CPU wheel exists)
os.environ["PYTHONPATH"] = os.pathsep.join([str(HARNESS), os.environ.get("PYTHONPATH", "")])
os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
sys.path.insert(0, str(HARNESS))

PROMPTS = [
    "the tree draft token",
    "def return if else for while",
    "seven apple river stone light cloud green blue",
]


def run(label: str, max_new: int, **spec) -> tuple[list, float, float]:
    import sglang as sgl

    from sglang_ddtree import tiny_models

    engine = sgl.Engine(
        model_path=str(tiny_models.model_path("llama")), device="cpu", dtype="float32",
        mem_fraction_static=0.3, max_total_tokens=4096, max_running_requests=8,
        disable_overlap_schedule=True, log_level="error", **spec,
    )
    try:
        engine.generate(PROMPTS[0], {"temperature": 0, "max_new_tokens": 4})  # warm-up
        t0 = time.perf_counter()
        outs = engine.generate(PROMPTS, {"temperature": 0, "max_new_tokens": max_new})
        dt = time.perf_counter() - t0
    finally:
        engine.shutdown()
    n_tokens = sum(o["meta_info"]["completion_tokens"] for o in outs)
    accept = [o["meta_info"].get("spec_accept_length", 1.0) for o in outs]
    mean_accept = sum(accept) / len(accept)
    print(f"[{label:>8}] {n_tokens} tokens in {dt:.2f}s = {n_tokens / dt:.1f} tok/s, "
          f"accept length {mean_accept:.2f}", flush=True)
    return [o["output_ids"] for o in outs], n_tokens / dt, mean_accept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--budget", type=int, default=32, help="--speculative-ddtree-budget")
    args = ap.parse_args()

    from sglang_ddtree import tiny_models

    base, _, _ = run("no-spec", args.max_new_tokens)
    draft = str(tiny_models.model_path("dflash-llama"))
    chain, _, _ = run("DFLASH", args.max_new_tokens, speculative_algorithm="DFLASH",
                      speculative_draft_model_path=draft)
    tree, _, _ = run("DDTREE", args.max_new_tokens, speculative_algorithm="DDTREE",
                     speculative_draft_model_path=draft, speculative_ddtree_budget=args.budget)
    same = base == chain == tree
    print(f"outputs identical to no speculation (DFLASH and DDTREE): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
