"""Tree-verify attention alone: sglang's ``extend_attention_fwd`` (custom mask, causal) against
``kernels.tree_attention`` (split context), same inputs, at Qwen3.6-27B's attention shape (24 query
/ 4 KV heads of 256, bf16), per batch size, window and context length. Each kernel is captured in a
CUDA graph of ``--layers`` launches (one per attention layer) and replayed; rows are microseconds
per launch (median of ``--reps`` replays), the max abs difference between the two outputs, and both
kernels' max abs error against the float64 reference at the smallest batch of each shape.
``--min-blocks`` times the split kernel once per minimum range length (``split_us_min<m>``;
``split_us`` is the first), ``--pack 0 1`` also with each KV head's group packed (``..._pack``). ``--drafter``: the DFlash drafter's block instead (32 / 8 heads of 128,
no mask, causal with a 2048-token sliding window, ``--window 16``).

    python3 benchmark/ddtree/bench_tree_attention.py --out tree_attention.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))


def inputs(bs, n, ctx, hq=24, hkv=4, d=256, seed=0, drafter=False):
    """A verify batch: ``bs`` windows of ``n`` tokens (random ancestor masks) over ``ctx`` committed
    tokens each, slots scattered over the pool."""
    g = torch.Generator().manual_seed(seed)
    T, slots = bs * n, bs * ctx + 1024
    dev, dt = "cuda", torch.bfloat16
    parent = torch.zeros(n, dtype=torch.long)
    for i in range(1, n):
        parent[i] = int(torch.randint(0, i, (1,), generator=g))
    anc = torch.eye(n, dtype=torch.bool)
    for i in range(1, n):
        anc[i] |= anc[parent[i]]
    row = torch.cat([torch.ones(n, ctx, dtype=torch.bool), anc], 1).reshape(-1)
    gd = torch.Generator(device=dev).manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=gd, device=dev, dtype=torch.float32).to(dt)

    if drafter:
        hq, hkv, d = 32, 8, 128
    return dict(
        drafter=drafter,
        q=rnd(T, hq, d), k_tree=rnd(T, hkv, d), v_tree=rnd(T, hkv, d),
        k_buffer=rnd(slots, hkv, d), v_buffer=rnd(slots, hkv, d),
        qo_indptr=torch.arange(0, T + 1, n, dtype=torch.int32, device=dev),
        kv_indptr=torch.arange(0, bs * ctx + 1, ctx, dtype=torch.int32, device=dev),
        kv_indices=torch.randperm(slots, generator=gd, device=dev)[: bs * ctx].to(torch.int64),
        custom_mask=None if drafter else row.repeat(bs).to(dev),
        mask_indptr=None if drafter else torch.arange(0, bs * n * (ctx + n) + 1, n * (ctx + n), dtype=torch.int64,
                                                      device=dev),
    )


DRAFT_WINDOW = 2048  # the drafter's sliding window (its causal layers)


def run_upstream(t, o, n):
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    extend_attention_fwd(t["q"], t["k_tree"], t["v_tree"], o, t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                         t["kv_indptr"], t["kv_indices"], t["custom_mask"], True, t["mask_indptr"], n, 1.0, 1.0,
                         t["q"].shape[-1] ** -0.5, sliding_window_size=DRAFT_WINDOW if t["drafter"] else -1)


def run_split(t, o, n, min_blocks=None, pack=None):
    from sglang_ddtree.kernels.tree_attention import split_plan, tree_attention_fwd

    T, hq, d = t["q"].shape
    plan = split_plan(t["qo_indptr"].shape[0] - 1, n, hq, d, torch.cuda.get_device_properties(0).multi_processor_count,
                      torch.cuda.get_device_capability(0), min_blocks=min_blocks, group=hq // t["k_buffer"].shape[1],
                      pack_gqa=pack)
    tree_attention_fwd(t["q"], t["k_tree"], t["v_tree"], o, t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                       t["kv_indptr"], t["kv_indices"], t["custom_mask"], t["mask_indptr"], n, d ** -0.5, plan=plan,
                       sliding_window=DRAFT_WINDOW if t["drafter"] else -1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bs", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--window", type=int, nargs="+", default=[17, 65])
    ap.add_argument("--ctx", type=int, nargs="+", default=[544, 2048, 8192])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--min-blocks", type=int, nargs="+", default=[None])
    ap.add_argument("--pack", type=int, nargs="+", default=[0], choices=[0, 1],
                    help="1: each KV head's q heads packed into one program (split_us..._pack)")
    ap.add_argument("--drafter", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    import functools
    from sglang_ddtree.kernels.tree_attention import tree_attention_reference
    from sglang_ddtree.testing.cuda_graph import replay_us

    rows = []
    for n in a.window:
        for ctx in a.ctx:
            for bs in a.bs:
                if bs * n * (ctx + n) > 2**31 or bs * ctx > 2_000_000:
                    continue
                t = inputs(bs, n, ctx, drafter=a.drafter)
                o_up, o_sp = torch.empty_like(t["q"]), torch.empty_like(t["q"])
                row = dict(bs=bs, window=n, ctx=ctx, drafter=a.drafter,
                           upstream_us=round(replay_us(functools.partial(run_upstream, t, o_up, n), a.layers,
                                                       a.reps), 2))
                variants = [(mb, pk) for pk in a.pack for mb in a.min_blocks]
                for mb, pk in reversed(variants):  # the first variant last: its output is compared
                    us = round(replay_us(functools.partial(run_split, t, o_sp, n, min_blocks=mb, pack=bool(pk)),
                                         a.layers, a.reps), 2)
                    row[(f"split_us_min{mb}" if mb else "split_us_default") + ("_pack" if pk else "")] = us
                    row["split_us"] = us
                row["speedup"] = round(row["upstream_us"] / row["split_us"], 2)
                row["max_abs_diff"] = float((o_up.float() - o_sp.float()).abs().max())
                row["nan"] = bool(torch.isnan(o_sp).any() or torch.isnan(o_up).any())
                if bs == a.bs[0]:
                    ref = tree_attention_reference(*(t[k] for k in ("q", "k_tree", "v_tree", "k_buffer", "v_buffer",
                                                                    "qo_indptr", "kv_indptr", "kv_indices",
                                                                    "custom_mask", "mask_indptr")),
                                                   t["q"].shape[-1] ** -0.5,
                                                   sliding_window=DRAFT_WINDOW if a.drafter else -1)
                    row["split_err"] = float((o_sp.double() - ref).abs().max())
                    row["upstream_err"] = float((o_up.double() - ref).abs().max())
                print(json.dumps(row), flush=True)
                rows.append(row)
                a.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
