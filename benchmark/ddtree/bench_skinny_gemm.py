"""The target's linear layers at a verify step's few tokens: cuBLAS (``F.linear``, what sglang's
layers call) against ``kernels.skinny_gemm`` swept over its tilings, at Qwen3.6-27B's weight
shapes, on one GPU. Answers whether a hand-tiled kernel reads the weights faster than cuBLAS does
at M = 16 / 17 (issue 29: the step's GEMMs run at 89-94% of the copy rate in the engine).

Per shape and M (and for the down projection also with the MLP's activation inside it, row
``act: "silu_mul"``, against sglang's activation kernel followed by cuBLAS): each variant is captured in a CUDA graph cycling over enough weight copies to
exceed the L2 several times, replayed ``--reps`` times (median); rows give microseconds per call
and the weight bytes read per second. Then the whole target's sequence of linear layers (64
layers: 16 x (3 GatedDeltaNet + 1 attention), each layer's projections in order, the lm_head
once) in one graph with cuBLAS and with the best tiling per shape, the MLP's activation included
(sglang's SiluAndMul before the down projection; ours also with it inside the product,
``act="silu_mul"``), and the card's copy rate. Each best tiling is also timed as a programmatic
dependent launch (``Config.pdl``; ``best_pdl_us``, ``best_silu_fused_pdl_ms``): back to back
with products of its own, which overstates what it gains beside sglang's kernels in the engine.
The best tiling's output is checked against cuBLAS's (max abs difference over max abs value).

    python3 benchmark/ddtree/bench_skinny_gemm.py --out skinny_gemm.json

The JSON is a table for ``--speculative-ddtree-gemm-table PATH`` on the GPU it was measured on
(``kernels/gemm_table.py``): measure at the token counts the server runs (``--m``: the verify width,
max(budget + 1, drafter block), times each batch size served; at most 128), and for a server of
``--tp-size N`` at ``--tp N`` (each rank's slice of the weights, ``testing/skinny_tables.py``: a
table holds the products' exact shapes, so one measured at another tensor-parallel size serves
none of them).

``--smoke`` runs the same sweep on CPU under ``TRITON_INTERPRET=1`` (widths / 64, fp16, one tiling
per shape, eager calls timed by the host clock): it checks the script, not the speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from sglang_ddtree.kernels.skinny_gemm import SILU_MUL, Config, m_tiles, skinny_linear  # noqa: E402
from sglang_ddtree.testing.cuda_graph import capture, replay_ms  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qwen36_shapes import shapes as qwen36_shapes, target_config  # noqa: E402

from sglang_ddtree.testing.skinny_tables import qwen35_linear_shapes  # noqa: E402

# name: (N, K) of Qwen3.6-27B's weight matrices, as sglang loads them (merged projections)
SHAPES = qwen35_linear_shapes(target_config(qwen36_shapes()))
H = SHAPES["lm_head"][1]  # the hidden size
GDN_LAYER = ["gdn_in_proj_qkvz", "gdn_in_proj_ba", "gdn_out_proj", "mlp_gate_up", "mlp_down"]
ATTN_LAYER = ["attn_qkv_proj", "attn_o_proj", "mlp_gate_up", "mlp_down"]
SEQUENCE = (GDN_LAYER * 3 + ATTN_LAYER) * 16 + ["lm_head"]


TILES = [(64, 128, 4), (64, 256, 3), (64, 64, 6), (128, 128, 3), (128, 64, 4), (128, 128, 4), (256, 64, 3),
         (32, 256, 4), (64, 128, 6), (128, 64, 6)]


def configs(M: int, N: int, K: int, sms: int, smem: int = 200 * 1024):
    """The tilings swept at one shape: ``TILES`` (BN, BK, stages) x split_k 1 / 2 / 4 / 8, with the
    stages' operand tiles within ``smem`` bytes (the device's shared memory per block: ~227 KiB on
    sm_90, ~99 KiB on sm_120, less a margin), K divisible, and no more than eight programs per
    multiprocessor; where ``M`` is at most 16 past a 16 / 32 / 64-token tile, each also with the
    tail tile (``Config.tail``: that tile and a 16-token tail instead of the next tile up)."""
    tails = (False, True) if m_tiles(M, True)[1] else (False,)
    for (BN, BK, st), sk, tail in itertools.product(TILES, (1, 2, 4, 8), tails):
        rows = sum(m_tiles(M, tail))
        if (BN * BK + BK * rows) * 2 * st > smem or K % (BK * sk):
            continue
        if sk > 1 and math.ceil(N / BN) * sk > 8 * sms:
            continue
        yield Config(BN=BN, BK=BK, split_k=sk, num_stages=st, num_warps=8 if BN == 256 else 4, tail=tail)


class _Eager:
    """The CPU smoke mode's stand-in for a captured graph: ``replay`` calls the function."""

    def __init__(self, fn):
        self.fn = fn

    def replay(self):
        self.fn()


def capture_or_eager(fn, smoke: bool):
    if smoke:
        return _Eager(fn), fn()
    return capture(fn)


def timed(graph, reps: int) -> float:
    """Milliseconds per replay, the median of ``reps``."""
    if isinstance(graph, _Eager):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            graph.replay()
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times)
    return replay_ms(graph, reps)


def cycling(fn, weights, calls, smoke):
    """A graph of ``calls`` calls of ``fn(w)`` over the weight copies in turn."""
    return capture_or_eager(lambda: [fn(weights[i % len(weights)]) for i in range(calls)], smoke)


def _pdl_ms(make_graph, reps):
    """Milliseconds per replay of the graph ``make_graph()`` captures (its products launched as
    programmatic dependent launches), or the error's text where the launch or its capture fails."""
    try:
        return timed(make_graph(), reps)
    except Exception as e:  # recorded: PDL in graph capture needs driver / runtime support
        return f"error: {type(e).__name__}: {str(e)[:120]}"


def _activation():
    """sglang's ``SiluAndMul`` (its CUDA kernel) where it imports, else the torch formula."""
    try:
        from sglang.srt.layers.activation import SiluAndMul

        if not torch.cuda.is_available():
            raise ImportError("CPU")
        return SiluAndMul().forward_cuda, "sglang SiluAndMul.forward_cuda"
    except Exception:  # the CPU smoke mode, or a host without sglang's kernels
        from sglang_ddtree.kernels.skinny_gemm import silu_mul_reference

        return silu_mul_reference, "torch (silu_mul_reference)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, nargs="+", default=[16, 17], help="tokens (verify positions)")
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--bytes-per-shape", type=float, default=1.5e9,
                    help="weight copies per shape, in bytes (at most 64 copies)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=300, help="stop sweeping after this long")
    ap.add_argument("--tp", type=int, default=1, help="the server's --tp-size: each rank's slice of the weights")
    ap.add_argument("--smoke", action="store_true", help="CPU, Triton interpreter, widths / 64")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    t0 = time.time()
    try:
        shapes = qwen35_linear_shapes(target_config(qwen36_shapes()), a.tp)
    except ValueError as e:
        ap.error(f"--tp: {e}")
    if a.smoke:
        from sglang_ddtree.testing.triton_interpreter import patch_scalar_index

        patch_scalar_index()
        shapes = {s: (max(16, n // 64), 1024 if k > H else 512) for s, (n, k) in shapes.items()}
        a.bytes_per_shape, a.reps = 1, 1
    dev, dt = ("cpu", torch.float16) if a.smoke else ("cuda", torch.bfloat16)
    props = None if a.smoke else torch.cuda.get_device_properties(0)
    sms = 4 if a.smoke else props.multi_processor_count
    # Operand tiles within the block's shared memory, with 24 KiB left for Triton's own use.
    smem = 200 * 1024 if a.smoke else min(200 * 1024, getattr(props, "shared_memory_per_block_optin", 0) - 24 * 1024)
    torch.manual_seed(0)

    if a.smoke:
        buf = torch.empty(int(2e6) // 2, dtype=dt, device=dev)
        dst = torch.empty_like(buf)
        g, _ = capture_or_eager(lambda: dst.copy_(buf), a.smoke)
        copy_rate = 2 * buf.numel() * 2 / timed(g, a.reps) / 1e9  # read + write, TB/s
        del buf, dst, g
    else:
        # step_cost.py's definition (an eager device copy, read + write), so the floors of the two
        # tools agree; a copy captured in a CUDA graph runs as a memcpy node, at a lower rate.
        from step_cost import memory_bandwidth_gbs

        copy_rate = memory_bandwidth_gbs() / 1e3
    meta = dict(device="cpu (smoke)" if a.smoke else torch.cuda.get_device_name(), sms=sms, smem_for_tiles=smem,
                copy_rate_tbs=round(copy_rate, 3), torch=torch.__version__, tp=a.tp)
    print("[skinny_gemm]", json.dumps(meta), flush=True)

    weights = {}
    for name in a.shapes:
        N, K = shapes[name]
        n = min(64, max(2, math.ceil(a.bytes_per_shape / (N * K * 2))))  # (64 x 1 MB of in_proj_ba > L2)
        weights[name] = [torch.randn(N, K, device=dev, dtype=dt) / K ** 0.5 for _ in range(n)]

    act, act_name = _activation()
    cases = [(M, name, None) for M, name in itertools.product(a.m, a.shapes)]
    if "mlp_down" in a.shapes:  # the down projection with the MLP's activation inside it
        cases += [(M, "mlp_down", SILU_MUL) for M in a.m]
    rows, best = [], {}
    for M, name, fused in cases:
        N, K = shapes[name]
        ws = weights[name]
        x = torch.randn(M, 2 * K if fused else K, device=dev, dtype=dt)
        calls = 4 * len(ws)
        gb = N * K * 2 / 1e9
        if fused:  # sglang's path: the activation's kernel, then the product
            g, _ = cycling(lambda w: F.linear(act(x), w), ws, calls, a.smoke)
            want = F.linear(act(x), ws[0]).float()
        else:
            g, _ = cycling(lambda w: F.linear(x, w), ws, calls, a.smoke)
            want = F.linear(x, ws[0]).float()
        cublas_us = timed(g, a.reps) * 1e3 / calls
        del g
        row = dict(m=M, shape=name, n=N, k=K, act=fused, cublas_us=round(cublas_us, 2),
                   cublas_tbs=round(gb / cublas_us * 1e3, 3), configs={})
        top = None
        for cfg in list(configs(M, N, K, sms, smem))[:1 if a.smoke else None]:
            if time.time() - t0 > a.max_seconds:
                row["stopped"] = "max-seconds"
                break
            wsp = torch.empty(cfg.split_k * M * N, dtype=torch.float32, device=dev)
            out = torch.empty(M, N, dtype=dt, device=dev)
            try:
                g, _ = cycling(lambda w, cfg=cfg: skinny_linear(x, w, cfg=cfg, out=out, workspace=wsp, act=fused),
                               ws, calls, a.smoke)
            except Exception as e:  # a tiling Triton cannot build here (resources): recorded, skipped
                if a.smoke:
                    raise
                row["configs"][cfg.name()] = f"error: {type(e).__name__}: {str(e)[:120]}"
                continue
            us = timed(g, a.reps) * 1e3 / calls
            del g
            row["configs"][cfg.name()] = round(us, 2)
            if top is None or us < top[1]:
                top = (cfg, us)
        if top is not None:
            cfg, us = top
            got = skinny_linear(x, ws[0], cfg=cfg, act=fused).float()
            err = float((got - want).abs().max() / want.abs().max())
            assert not torch.isnan(got).any() and err < 2e-2, (name, M, fused, err)
            row.update(best=cfg.name(), best_us=round(us, 2), best_tbs=round(gb / us * 1e3, 3),
                       best_vs_cublas=round(us / cublas_us, 4), best_rel_err=err)
            best[(M, name, fused)] = cfg
            if not a.smoke:  # the same tiling launched as a programmatic dependent launch
                pdl = dataclasses.replace(cfg, pdl=True)
                wsp = torch.empty(cfg.split_k * M * N, dtype=torch.float32, device=dev)
                ms = _pdl_ms(lambda: cycling(lambda w: skinny_linear(x, w, cfg=pdl, workspace=wsp, act=fused), ws,
                                             calls, a.smoke)[0], a.reps)
                row["best_pdl_us"] = round(ms * 1e3 / calls, 2) if isinstance(ms, float) else ms
        print("[skinny_gemm]", json.dumps({k: v for k, v in row.items() if k != "configs"}), flush=True)
        rows.append(row)

    seq = []
    if set(a.shapes) == set(shapes):
        for M in a.m:
            if not all((M, s, None) in best for s in shapes) or (M, "mlp_down", SILU_MUL) not in best:
                continue
            x = {s: torch.randn(M, shapes[s][1], device=dev, dtype=dt) for s in shapes}
            splits = {s: max(cfg.split_k for (m, name, _), cfg in best.items() if m == M and name == s) for s in shapes}
            wsps = {s: torch.empty(splits[s] * M * shapes[s][0], dtype=torch.float32, device=dev) for s in shapes}
            count = {s: 0 for s in shapes}

            def nxt(s):
                count[s] += 1
                return weights[s][count[s] % len(weights[s])]

            gu = torch.randn(M, 2 * shapes["mlp_down"][1], device=dev, dtype=dt)  # the down projection's input

            def theirs(s):
                if s == "mlp_down":  # sglang's MLP: the activation's kernel, then the product
                    return F.linear(act(gu), nxt(s))
                return F.linear(x[s], nxt(s))

            def ours(s, fused, tilings=best):
                if s == "mlp_down":
                    if fused:
                        return skinny_linear(gu, nxt(s), cfg=tilings[(M, s, SILU_MUL)], workspace=wsps[s],
                                             act=SILU_MUL)
                    return skinny_linear(act(gu), nxt(s), cfg=tilings[(M, s, None)], workspace=wsps[s])
                return skinny_linear(x[s], nxt(s), cfg=tilings[(M, s, None)], workspace=wsps[s])

            g1, _ = capture_or_eager(lambda: [theirs(s) for s in SEQUENCE], a.smoke)
            g2, _ = capture_or_eager(lambda: [ours(s, False) for s in SEQUENCE], a.smoke)
            g3, _ = capture_or_eager(lambda: [ours(s, True) for s in SEQUENCE], a.smoke)
            gbytes = sum(shapes[s][0] * shapes[s][1] * 2 for s in SEQUENCE) / 1e9
            r = dict(m=M, weight_gb=round(gbytes, 3), cublas_ms=round(timed(g1, a.reps), 3),
                     best_ms=round(timed(g2, a.reps), 3), best_silu_fused_ms=round(timed(g3, a.reps), 3),
                     floor_ms_at_copy_rate=round(gbytes / copy_rate, 3), activation=act_name)
            del g1, g2, g3
            if not a.smoke:  # every product of the fused sequence a programmatic dependent launch
                pdl = {k: dataclasses.replace(c, pdl=True) for k, c in best.items()}
                ms = _pdl_ms(lambda: capture(lambda: [ours(s, True, pdl) for s in SEQUENCE])[0], a.reps)
                r["best_silu_fused_pdl_ms"] = round(ms, 3) if isinstance(ms, float) else ms
            print("[skinny_gemm] sequence", json.dumps(r), flush=True)
            seq.append(r)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(dict(meta=meta, rows=rows, sequence=seq, seconds=round(time.time() - t0, 1)),
                                indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
