"""Where speculative decoding leaves plain greedy decoding on a GPU, per algorithm.

Servers on one tiny model (``--model``), each on the same GPU: the reference without
speculation, sglang's ``DFLASH``, ``DDTREE-chain`` (top-k 1, budget 15: DFLASH's 16-position
verify), ``DDTREE`` (``--budget`` / ``--topk``, GatedDeltaNet mode wy) and ``DDTREE-snapshot``
(mode snapshot), all drafting with the tiny random DFlash drafter (about one token accepted per
step, so nearly every output token comes from a verify's first position), and
``DDTREE-oracle`` (the test oracle drafter replays the reference's own output, so whole paths
are accepted and tokens come from every tree depth). The first
``--prompts`` greedy ``/generate`` requests of the soak's plan (``soak.plan``, ``--seed``) go to
each server one at a time (no batching), ``--max-new-tokens`` each; every answer is compared
with the reference's (``gpu_cases.compare_to_reference`` on the reference's top
``soak.REF_TOP`` log-probs): equal, a near-tie within ``--tol``, or a mismatch, with the gap
(nats) and position of each first difference.

The question it answers: does DDTREE leave plain decoding more than the engine's own
speculative decoding does (sglang's DFLASH, same drafter, same verify attention) on the same
prompts? Output: a JSON summary at ``--out`` and one line per algorithm.

    python benchmark/ddtree/divergence.py --model qwen35 --out divergence-qwen35.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import soak  # noqa: E402  (puts python/ and test/e2e/ on the path)
from cpu_engine import http_server  # noqa: E402

ALGORITHMS = ("DFLASH", "DDTREE-chain", "DDTREE", "DDTREE-snapshot", "DDTREE-oracle")


def server_args(model: str, algorithm: str, budget: int, topk: int, dtype: str = "bfloat16") -> list:
    """``launch_server`` arguments: the soak's CUDA servers (graphs up to 4 requests), the
    reference (``algorithm`` None) without speculation."""
    from sglang_ddtree.testing import tiny_models

    args = soak.server_args(model, "cuda", algorithm is not None and algorithm.startswith("DDTREE"),
                            budget, topk, 4, dtype=dtype)
    args = [a for a in args if a != "--disable-overlap-schedule"]
    i = args.index("--mem-fraction-static")
    args[i + 1] = "0.12"
    i = args.index("--max-total-tokens")
    args[i + 1] = "32768"
    if algorithm == "DDTREE-chain":
        args[args.index("--speculative-ddtree-budget") + 1] = "15"
        args[args.index("--speculative-ddtree-topk") + 1] = "1"
    if algorithm == "DDTREE-snapshot":
        args[args.index("--speculative-ddtree-gdn-mode") + 1] = "snapshot"
    if algorithm == "DFLASH":
        args += ["--speculative-algorithm", "DFLASH",
                 "--speculative-draft-model-path", str(tiny_models.model_path(f"dflash-{model}"))]
    return args


def compare(got: dict, ref: dict, tol: float) -> dict:
    c = soak._compare_ids(got["output_ids"], ref["output_ids"], soak._top(ref["meta"]), tol)
    if c["equal"]:
        return {"status": "equal"}
    nt = c["near_tie"]
    return {"status": "near_tie" if nt and nt["ok"] else "mismatch", "pos": c["compared"],
            "gap": None if nt is None else round(nt["gap"], 4), "listed": None if nt is None else nt["listed"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=soak.MODELS, default="qwen35")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--topk", type=int, default=4)
    ap.add_argument("--tol", type=float, default=0.2, help="near-tie tolerance (nats)")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--startup-timeout-s", type=float, default=400.0)
    a = ap.parse_args(argv)

    import requests

    from sglang_ddtree.testing import tiny_models
    from sglang_ddtree.testing.oracle_drafter import write_oracle_file

    vocab = json.loads((tiny_models.model_path(a.model) / "config.json").read_text())["vocab_size"]
    plan = soak.plan(max(a.prompts * 8, 64), a.seed, vocab, a.max_new_tokens)
    items = [it for it in plan if it.kind == "greedy"][: a.prompts]
    for it in items:
        it.body["sampling_params"]["max_new_tokens"] = a.max_new_tokens
        it.body["sampling_params"]["ignore_eos"] = True
    work = a.out.parent / f"{a.out.stem}-work"
    work.mkdir(parents=True, exist_ok=True)
    oracle = work / "oracle.json"
    write_oracle_file(oracle, "first", {})
    names = [None, *a.algorithms]
    t0 = time.time()

    def env(name):
        e = soak.dtype_env(a.model, "cuda", a.dtype)
        if name == "DDTREE-oracle":
            e["SGLANG_DDTREE_TEST_ORACLE"] = str(oracle)
        return e

    def alone(base, ref):
        s = requests.Session()
        s.headers["Connection"] = "close"
        return {it.index: soak.send(base, it, s, 120, ref, a.tol) for it in items}

    summary = {"model": a.model, "dtype": a.dtype, "prompts": len(items), "max_new_tokens": a.max_new_tokens, "tol": a.tol,
               "budget": a.budget, "topk": a.topk, "algorithms": {}}
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(len(names)) as pool:
        futs = {n: pool.submit(stack.enter_context, http_server(
            server_args(a.model, n, a.budget, a.topk, a.dtype), work / f"{n or 'plain'}.log", env(n), a.startup_timeout_s))
            for n in names}
        bases = {n: f.result()[0] for n, f in futs.items()}
        summary["startup_s"] = round(time.time() - t0, 1)
        ref = alone(bases[None], True)
        write_oracle_file(oracle, "first", [(it.prompt, ref[it.index]["output_ids"]) for it in items])
        outs = dict(zip(a.algorithms, pool.map(lambda n: alone(bases[n], False), a.algorithms)))
        for n in a.algorithms:
            st = soak._info(bases[n])
            acc = st.get("avg_spec_accept_length")
            rows = [dict(compare(outs[n][it.index], ref[it.index], a.tol), index=it.index) for it in items]
            gaps = sorted(r["gap"] for r in rows if r.get("gap") is not None)
            pos = sorted(r["pos"] for r in rows if "pos" in r)
            summary["algorithms"][n] = {
                "equal": sum(r["status"] == "equal" for r in rows),
                "near_tie": sum(r["status"] == "near_tie" for r in rows),
                "mismatch": sum(r["status"] == "mismatch" for r in rows),
                "gap_median": statistics.median(gaps) if gaps else None, "gaps": gaps,
                "first_diff_pos_median": statistics.median(pos) if pos else None,
                "accept_length": acc, "rows": rows}
    summary["duration_s"] = round(time.time() - t0, 1)
    a.out.write_text(json.dumps(summary, indent=1))
    for n, s in summary["algorithms"].items():
        print(f"[divergence] {a.model} {a.dtype} {n}: equal {s['equal']}, near-tie {s['near_tie']}, mismatch {s['mismatch']} "
              f"of {len(items)} (tol {a.tol}); gaps median {s['gap_median']}, max {max(s['gaps'], default=None)}; "
              f"first difference median position {s['first_diff_pos_median']}; accept length "
              f"{s['accept_length'] if s['accept_length'] is None else round(s['accept_length'], 2)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
