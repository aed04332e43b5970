"""Does asking the L2 for the next product's weights hide the kernels between the products?
(issue 29: a verify step at one request is its weight reads plus ~1.7-2 ms of small kernels,
norms, GatedDeltaNet, attention, during which the memory is nearly idle.)

The target's sequence of linear layers at Qwen3.6-27B's shapes (``bench_skinny_gemm.py``'s
``SEQUENCE``: 64 layers, the lm_head once) at ``--m`` tokens, each product through
``kernels.skinny_gemm`` with the tiling a GEMM table gives it (``--table``, default the shipped
H100 table, read whatever GPU runs it; the down projection with the activation inside, as the
engine runs it; shapes without a row through cuBLAS), in one CUDA graph, with a stand-in for the
kernels between products before each: ``torch.cuda._sleep`` of ``--gap-norm`` us before the
input projections and the MLP (a norm), ``--gap-gdn`` before the GatedDeltaNet out projection
(conv, recurrence, gated norm), ``--gap-attn`` before the attention out projection. Variants:

- ``gemm``: the products alone; ``gaps``: with the stand-ins; ``sleep``: the stand-ins alone;
- ``epi:P``: with the stand-ins, each product's last programs ask the L2 for the first P MiB of
  the next product's weight after their main loop (in_proj_ba, on sglang's second stream in the
  engine, is skipped: in_proj_qkvz asks for the out projection's) (``skinny_linear(prefetch=...)``; a cuBLAS
  product gets ``kern`` instead); ``epi:fit``: P sized to the gap that follows (its duration
  at ``--fit-rate`` TB/s, at most ``--fit-max`` MiB);
- ``kern:P``: the same request from a kernel of its own launched right after each product
  (``prefetch_l2``); ``:last`` suffix: the lines asked with the ``evict_last`` hint.

Rows: ms per replay (median of ``--reps``), and for each variant the share of the gaps' cost
(``gaps - gemm``) it recovered. Every variant's outputs are compared with ``gemm``'s (a prefetch
must change nothing).

    python3 benchmark/ddtree/bench_l2_prefetch.py --out l2_prefetch.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sglang_ddtree.kernels.gemm_table import MAX_RATIO  # noqa: E402
from sglang_ddtree.kernels.skinny_gemm import (SILU_MUL, Config, prefetch_l2, silu_mul_reference,  # noqa: E402
                                               skinny_linear)
from sglang_ddtree.testing.cuda_graph import capture, replay_ms  # noqa: E402
from bench_skinny_gemm import SEQUENCE, SHAPES  # noqa: E402

TABLE = ROOT / "python/sglang_ddtree/kernels/gemm_tables/nvidia_h100_80gb_hbm3.json"
MIB = 1 << 20


def gap_before(s: str) -> str:
    """Which stand-in precedes a product of shape ``s``: "norm", "gdn", "attn" or ""."""
    if s in ("gdn_in_proj_qkvz", "attn_qkv_proj", "mlp_gate_up", "lm_head"):
        return "norm"
    if s == "gdn_out_proj":
        return "gdn"
    if s == "attn_o_proj":
        return "attn"
    return ""  # in_proj_ba (beside qkvz), the down projection (its activation is inside)


def _big(w: torch.Tensor) -> bool:
    """Whether a product is in the prefetch chain: weights of 16 MiB and more (in_proj_ba, 1 MiB,
    runs beside in_proj_qkvz on sglang's second stream: it neither asks nor is asked for)."""
    return w.numel() * w.element_size() >= 16 * MIB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, nargs="+", default=[16])
    ap.add_argument("--table", type=Path, default=TABLE)
    ap.add_argument("--gap-norm", type=float, default=3.0)
    ap.add_argument("--gap-gdn", type=float, default=18.0)
    ap.add_argument("--gap-attn", type=float, default=25.0)
    ap.add_argument("--mib", type=float, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--fit-rate", type=float, default=3.0, help="TB/s: epi:fit's bytes per us of gap")
    ap.add_argument("--fit-max", type=float, default=32.0, help="MiB: epi:fit's most")
    ap.add_argument("--bytes-per-shape", type=float, default=1.5e9)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--deadline-s", type=float, default=400)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    t0 = time.time()
    dev, dt = "cuda", torch.bfloat16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    table = json.loads(a.table.read_text())
    weights = {}
    for name, (N, K) in SHAPES.items():
        n = min(64, max(2, math.ceil(a.bytes_per_shape / (N * K * 2))))
        weights[name] = [torch.randn(N, K, device=dev, dtype=dt) / K ** 0.5 for _ in range(n)]

    # cycles per microsecond of torch.cuda._sleep, from a graph of sleeps
    g, _ = capture(lambda: [torch.cuda._sleep(100_000) for _ in range(20)])
    cyc_per_us = 20 * 100_000 / (replay_ms(g, 5) * 1e3)
    del g
    gaps = dict(norm=a.gap_norm, gdn=a.gap_gdn, attn=a.gap_attn, **{"": 0.0})
    meta = dict(device=torch.cuda.get_device_name(), sms=sms, table=str(a.table.relative_to(ROOT)
                if a.table.is_relative_to(ROOT) else a.table), gaps_us=gaps, cycles_per_us=round(cyc_per_us, 1),
                torch=torch.__version__)
    print("[l2_prefetch]", json.dumps(meta), flush=True)
    rows = []
    for M in a.m:
        tiling = {(r["shape"], r["act"]): Config.from_name(r["best"]) for r in table["rows"]
                  if r["m"] == M and r["best_vs_cublas"] <= MAX_RATIO}
        count = {s: 0 for s in SHAPES}
        items = []  # (shape, weight, x, act, cfg or None, gap kind)
        xs = {s: torch.randn(M, K, device=dev, dtype=dt) for s, (N, K) in SHAPES.items()}
        gu = torch.randn(M, 2 * SHAPES["mlp_down"][1], device=dev, dtype=dt)
        gu_act = silu_mul_reference(gu)
        for s in SEQUENCE:
            w = weights[s][count[s] % len(weights[s])]
            count[s] += 1
            fused = s == "mlp_down" and ("mlp_down", SILU_MUL) in tiling
            act = SILU_MUL if fused else None
            x = (gu if fused else gu_act) if s == "mlp_down" else xs[s]
            items.append((s, w, x, act, tiling.get((s, act)), gap_before(s)))
        # each product's successor in the prefetch chain: the next large one, wrapping round
        nxt_of = [next(items[(i + j) % len(items)] for j in range(1, len(items)) if _big(items[(i + j) % len(items)][1]))
                  for i in range(len(items))]
        wsp = torch.empty(8 * M * max(n for n, _ in SHAPES.values()), dtype=torch.float32, device=dev)
        outs = [torch.empty(M, w.shape[0], device=dev, dtype=dt) for _, w, *_ in items]

        def run(mode: str, mib, evict_last: bool):
            for i, (s, w, x, act, cfg, gap) in enumerate(items):
                if mode != "gemm" and gaps[gap]:
                    torch.cuda._sleep(int(gaps[gap] * cyc_per_us))
                if mode == "sleep":
                    continue
                nxt = nxt_of[i]
                small = not _big(w)  # in_proj_ba: beside in_proj_qkvz on sglang's second stream
                if mib == "fit":
                    nbytes = int(min(a.fit_max * MIB, gaps[nxt[5]] * a.fit_rate * 1e6))
                else:
                    nbytes = int((mib or 0) * MIB)
                if small:
                    nbytes = 0
                epi = mode == "epi" and cfg is not None and nbytes
                if cfg is None:
                    torch.mm(x, w.T, out=outs[i])
                else:
                    skinny_linear(x, w, cfg=cfg, out=outs[i], workspace=wsp, act=act,
                                  prefetch=nxt[1] if epi else None, prefetch_bytes=nbytes if epi else 0,
                                  prefetch_evict_last=evict_last)
                if mode in ("kern", "epi") and nbytes and not epi:
                    prefetch_l2(nxt[1], nbytes, evict_last=evict_last)
            return outs

        variants = [("gemm", None, False), ("sleep", None, False), ("gaps", None, False)]
        for mib in list(a.mib) + ["fit"]:
            for ev in (False, True):
                variants.append(("epi", mib, ev))
        for mib in a.mib:
            variants.append(("kern", mib, False))
        ref = None
        res = {}
        for mode, mib, ev in variants:
            if time.time() - t0 > a.deadline_s:
                res["stopped"] = "deadline"
                break
            name = mode + (f":{mib}" if mib is not None else "") + (":last" if ev else "")
            try:
                g, out = capture(lambda: run(mode, mib, ev))
                ms = replay_ms(g, a.reps)
                ms2 = replay_ms(g, a.reps)
                del g
            except Exception as e:  # recorded: a variant that does not build or capture here
                res[name] = f"error: {type(e).__name__}: {str(e)[:160]}"
                print("[l2_prefetch]", M, name, res[name], flush=True)
                continue
            if mode == "gemm":
                ref = [o.clone() for o in out]
            elif mode != "sleep":
                bad = sum(not torch.equal(o, r) for o, r in zip(out, ref))
                assert bad == 0, f"{name}: {bad} outputs differ from the products alone"
            res[name] = [round(ms, 3), round(ms2, 3)]
            print("[l2_prefetch]", M, name, res[name], flush=True)
        base, gapped = res.get("gemm"), res.get("gaps")
        row = dict(m=M, ms=res, tilings={f"{s}{'+' + act if act else ''}": c.name() for (s, act), c in tiling.items()})
        if isinstance(base, list) and isinstance(gapped, list):
            cost = min(gapped) - min(base)
            row["gap_cost_ms"] = round(cost, 3)
            row["recovered"] = {k: round((min(gapped) - min(v)) / cost, 3) for k, v in res.items()
                                if isinstance(v, list) and k.split(":")[0] in ("epi", "kern") and cost > 0}
        print("[l2_prefetch] row", json.dumps({k: v for k, v in row.items() if k != "tilings"}), flush=True)
        rows.append(row)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(dict(meta=meta, rows=rows, seconds=round(time.time() - t0, 1)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
