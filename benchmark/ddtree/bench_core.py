"""Microbenchmark of the DDTree core per decode step (issue 3): tree build + verify layout +
walk (+ commit plan), eager and CUDA-graph replayed, over batch sizes and budgets.

The draft's per-depth top-K (from ``[bs, L, V]`` logits) is timed separately at the real
Qwen3.6 vocabulary, since it is a full pass over the logits and scales with V, not with B.

    python benchmark/ddtree/bench_core.py --out results.json

Prints a table (median ms per step) and writes JSON with the raw numbers.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from sglang_ddtree.core.step import draft_to_verify, verify_to_commit  # noqa: E402
from sglang_ddtree.core.topk import depth_topk  # noqa: E402
from sglang_ddtree.testing.cuda_graph import capture  # noqa: E402


def _median_ms(fn, iters: int) -> float:
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def bench_step(bs: int, B: int, L: int, K: int, iters: int, compiled: bool = False,
               cuda_kernels: bool = False, core_only: bool = False) -> dict:
    g = torch.Generator(device="cuda").manual_seed(bs * 1000 + B)
    logits = torch.randn(bs, L, 4096, device="cuda", generator=g)
    lp, ids = depth_topk(logits, K)
    roots = torch.randint(0, 4096, (bs,), device="cuda", generator=g)
    prefix = torch.randint(10, 2000, (bs,), device="cuda", generator=g)
    window = torch.arange(bs * (B + 1), device="cuda").view(bs, B + 1)

    def step_eager():
        tree, lay = draft_to_verify(lp, ids, roots, prefix, B, B + 1)
        target = torch.gather(lay.tokens, 1, lay.first_child.clamp(min=0))
        return verify_to_commit(lay, target, L, window)

    def step_cuda():
        from sglang_ddtree.core.commit_plan import build_commit_plan
        from sglang_ddtree.kernels import tree_cuda

        tree, lay = tree_cuda.build_tree_and_layout(lp, ids, roots, prefix, B)
        target = torch.gather(lay.tokens, 1, lay.first_child.clamp(min=0))
        acc = tree_cuda.tree_walk(lay, target, L)
        if core_only:  # builder + layout + walk
            return acc
        return acc, build_commit_plan(acc, window)

    # torch.compile (inductor) fuses the elementwise chains between the topk/scatter kernels.
    if cuda_kernels:
        step = step_cuda
    else:
        step = torch.compile(step_eager, fullgraph=False, dynamic=False) if compiled else step_eager

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    eager = _median_ms(step, iters)
    graph, _ = capture(step)
    for _ in range(3):
        graph.replay()
    replay = _median_ms(graph.replay, iters)
    variant = ("cuda-core" if core_only else "cuda") if cuda_kernels else ("compiled" if compiled else "torch")
    return {"bs": bs, "B": B, "L": L, "K": K, "variant": variant, "eager_ms": eager, "graph_ms": replay}


def bench_topk(bs: int, L: int, V: int, K: int, iters: int) -> dict:
    logits = torch.randn(bs, L, V, device="cuda", dtype=torch.bfloat16)
    fn = lambda: depth_topk(logits, K)  # noqa: E731
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = _median_ms(fn, iters)
    bytes_read = logits.numel() * logits.element_size()
    return {"bs": bs, "L": L, "V": V, "K": K, "ms": ms, "GBps_logits_read": bytes_read / ms / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bs", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--depth", type=int, default=15, help="L = block size - 1")
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=248320)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", type=str, default=None)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile'd step")
    ap.add_argument("--cuda", action="store_true", help="also time the CUDA tree kernels")
    ap.add_argument("--skip-torch", action="store_true", help="do not time the torch step")
    ap.add_argument("--skip-topk", action="store_true", help="do not time the per-depth top-K")
    args = ap.parse_args()

    rows = []
    print(f"{'bs':>4} {'B':>5} {'variant':>8} {'eager ms':>9} {'graph ms':>9}", flush=True)
    variants = [] if args.skip_torch else [(False, False, False)]
    variants += ([(True, False, False)] if args.compile else [])
    variants += ([(False, True, False), (False, True, True)] if args.cuda else [])
    for compiled, cuda_k, core in variants:
        for bs in args.bs:
            for B in args.budgets:
                r = bench_step(bs, B, args.depth, args.topk, args.iters, compiled, cuda_k, core)
                rows.append(r)
                print(f"{bs:>4} {B:>5} {r['variant']:>8} {r['eager_ms']:>9.3f} {r['graph_ms']:>9.3f}", flush=True)
    topk_rows = []
    print(f"\n{'bs':>4} {'V':>7} {'topk ms':>8} {'GB/s':>7}")
    for bs in ([] if args.skip_topk else args.bs):
        r = bench_topk(bs, args.depth, args.vocab, args.topk, args.iters)
        topk_rows.append(r)
        print(f"{bs:>4} {args.vocab:>7} {r['ms']:>8.3f} {r['GBps_logits_read']:>7.0f}", flush=True)
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "step": rows, "topk": topk_rows}, indent=1))


if __name__ == "__main__":
    main()
