"""Ship few-token GEMM tables with the package: merge ``bench_skinny_gemm.py`` tables of one GPU
model into ``python/sglang_ddtree/kernels/gemm_tables/<device>.json``, the table
``--speculative-ddtree-gemm-table auto`` serves on that GPU (``kernels/gemm_table.py``).

    python3 benchmark/ddtree/ship_gemm_table.py results/.../skinny_gemm_m16_m17.json results/.../skinny_gemm.json

Rows keep what the server and a reader need (``m``, ``shape``, ``n``, ``k``, ``act``, ``best``,
``best_vs_cublas``, ``cublas_us``, ``best_us``), not the per-tiling sweep; where two inputs have a
row for the same ``(m, n, k, act)`` the later input's wins. ``meta.sources`` names the inputs.
Exits with a message when the inputs were measured on different GPUs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

KEEP = ("m", "shape", "n", "k", "act", "best", "best_vs_cublas", "cublas_us", "best_us")


def merge(tables: list, names: list) -> dict:
    """``tables``: parsed bench JSONs of one GPU -> the shipped table (a dict)."""
    devices = {t["meta"]["device"] for t in tables}
    if len(devices) != 1:
        raise SystemExit(f"ship_gemm_table.py: inputs measured on different GPUs: {sorted(devices)}")
    rows = {}
    for t in tables:
        for r in t["rows"]:
            rows[(r["m"], r["n"], r["k"], r.get("act"))] = {k: r.get(k) for k in KEEP}
    meta = dict(tables[-1]["meta"], sources=list(names))
    return dict(meta=meta, rows=[rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1], k[2], str(k[3])))])


def main(argv=None) -> Path:
    from sglang_ddtree.kernels.gemm_table import TABLES_DIR, device_slug, load_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", type=Path, nargs="+", help="bench_skinny_gemm.py outputs of one GPU model")
    ap.add_argument("--out-dir", type=Path, default=TABLES_DIR)
    a = ap.parse_args(argv)
    names = [str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p) for p in a.tables]
    shipped = merge([json.loads(p.read_text()) for p in a.tables], names)
    out = a.out_dir / f"{device_slug(shipped['meta']['device'])}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(shipped, indent=1) + "\n")
    served = load_table(out, shipped["meta"]["device"])
    print(f"{out}: {len(shipped['rows'])} rows, {len(served)} served (tokens, N, K, act): "
          f"{sorted(served, key=str)}")
    return out


if __name__ == "__main__":
    main()
