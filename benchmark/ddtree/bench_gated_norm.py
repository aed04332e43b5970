"""A GatedDeltaNet layer's gated norm alone at Qwen3.6-27B's shape (48 value heads of 128, bf16):
sglang's path (the gate copied contiguous, then its gated RMSNorm on ``[T * 48, 128]`` rows) against
``kernels.gated_norm`` reading the gate in place, per verify size (tokens = requests x 17) and
per ``block_heads``. Each variant is captured in a CUDA graph of ``--layers`` launches (one per
GatedDeltaNet layer) and replayed; rows are microseconds per layer (median of ``--reps``
replays) and the max abs difference from sglang's output.

    python3 benchmark/ddtree/bench_gated_norm.py --out gated_norm.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from sglang_ddtree.kernels.gated_norm import gated_rmsnorm  # noqa: E402
from sglang_ddtree.testing.cuda_graph import replay_us  # noqa: E402

HV, V, KEY, QKV = 48, 128, 16 * 128, 2 * 16 * 128 + 48 * 128  # heads, head dim, q|k width, q|k|v width


def main() -> int:
    from sglang.kernels.ops.attention.fla.layernorm_gated import RMSNorm as RMSNormGated

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--width", type=int, default=17, help="verify positions per request")
    ap.add_argument("--block-heads", type=int, nargs="+", default=[0, 1, 2, 4, 8, 16],
                    help="0: the kernel's default")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    norm = RMSNormGated(V, eps=1e-6, group_size=None, norm_before_gate=True, device=dev, dtype=dt)
    rows = []
    for bs in a.requests:
        T = bs * a.width
        g = torch.Generator(device=dev).manual_seed(bs)
        qkvz = torch.randn(T, QKV + HV * V, generator=g, device=dev).to(dt)
        core = torch.randn(T, HV, V, generator=g, device=dev).to(dt)
        z = qkvz[:, QKV:].unflatten(-1, (HV, V))

        def sglang_path():
            return norm(core.reshape(-1, V), z.reshape(-1, V))  # z.reshape copies: rows 2 KEY + 2 HV V apart

        want = sglang_path().reshape(T, HV * V)
        row = dict(requests=bs, tokens=T, sglang_us=round(replay_us(sglang_path, a.layers, a.reps), 2))
        for bh in a.block_heads:
            def ours(bh=bh):
                return gated_rmsnorm(core, z, norm.weight, 1e-6, block_heads=bh or None)

            got = ours()
            key = f"ours_bh{bh}" if bh else "ours_default"
            row[key + "_us"] = round(replay_us(ours, a.layers, a.reps), 2)
            row[key + "_maxdiff"] = float((got.float() - want.float()).abs().max())
            assert not torch.isnan(got).any()
        print("[gated_norm]", json.dumps(row), flush=True)
        rows.append(row)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
