"""Few-token GEMM tables: which linear products ``kernels/skinny_gemm.py`` serves, per GPU model,
and the values of ``--speculative-ddtree-gemm-table``.

A table is ``benchmark/ddtree/bench_skinny_gemm.py``'s JSON:

    {"meta": {"device": <torch.cuda.get_device_name()>, ...},
     "rows": [{"m": tokens, "n": N, "k": K, "act": null | "silu_mul",
               "best": <Config.name()> | null, "best_vs_cublas": <its time / cuBLAS's>}, ...]}

A row is served where its tiling took at most ``MAX_RATIO`` of cuBLAS's time, ``1 <= m <=
MAX_M``. Tables shipped with the package live in ``gemm_tables/<device_slug(name)>.json`` beside
this file. The flag's values: ``auto`` (the shipped table of this GPU's name, if any), ``none``,
or a table's path; every error is a ValueError naming the flag.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, Optional, Tuple

import torch

from .skinny_gemm import ACTS, MAX_M, Config

FLAG = "--speculative-ddtree-gemm-table"
AUTO, NONE = "auto", "none"
TABLES_DIR = Path(__file__).resolve().parent / "gemm_tables"
MAX_RATIO = 0.98  # a tiling is used only where it measured at least 2% faster than cuBLAS

Key = Tuple[int, int, int, Optional[str]]  # (tokens, N, K, act)


def device_slug(device_name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia_h100_80gb_hbm3"`` (a shipped table's file stem)."""
    return re.sub(r"[^a-z0-9]+", "_", device_name.lower()).strip("_")


def shipped_table(device_name: str) -> Optional[Path]:
    """The table shipped for this GPU name, or None."""
    path = TABLES_DIR / f"{device_slug(device_name)}.json"
    return path if path.is_file() else None


def load_table(path: Path, device: Optional[str] = None) -> Dict[Key, Config]:
    """``{(m, n, k, act): Config}`` of the rows of ``path`` whose best tiling beat sglang's path by
    the margin. ``device``: this GPU's name; a table whose ``meta.device`` differs is refused."""
    try:
        data = json.loads(Path(path).read_text())
        rows = data["rows"]
        table = {}
        for r in rows:
            act = r.get("act")
            if act not in ACTS:
                raise ValueError(f"act {act!r}")
            if r.get("best") and float(r["best_vs_cublas"]) <= MAX_RATIO and 1 <= int(r["m"]) <= MAX_M:
                table[(int(r["m"]), int(r["n"]), int(r["k"]), act)] = Config.from_name(r["best"])
        measured_on = data.get("meta", {}).get("device")
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"{FLAG} {path}: not a benchmark/ddtree/bench_skinny_gemm.py table ({e})") from e
    if device is not None and measured_on != device:
        raise ValueError(f"{FLAG} {path}: measured on {measured_on!r}, this GPU is {device!r}; measure one on "
                         f"this GPU with benchmark/ddtree/bench_skinny_gemm.py, or pass {FLAG} {NONE}.")
    return table


def table_path(value: str, device: Optional[str]) -> Optional[Path]:
    """The table the flag's ``value`` names on a GPU called ``device`` (None: no CUDA GPU), or None
    for sglang's path everywhere. ValueError naming the flag for a path on a machine without a
    CUDA GPU, a missing file, or a table that does not load (:func:`load_table`) or was measured
    on another GPU."""
    if value == NONE or (value == AUTO and device is None):
        return None
    if value == AUTO:
        return shipped_table(device)
    path = _named_file(value, cuda=device is not None)
    load_table(path, device)
    return path


def _named_file(value: str, cuda: bool) -> Path:
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"{FLAG} must be {AUTO}, {NONE} or the path of a table written by "
                         f"benchmark/ddtree/bench_skinny_gemm.py; {value!r} is not a file.")
    if not cuda:
        raise ValueError(f"{FLAG} {value}: the few-token GEMM runs on CUDA GPUs only; pass {FLAG} {AUTO} "
                         f"(or {NONE}) here.")
    return path


def device_name() -> Optional[str]:
    """This process's CUDA GPU's name, or None without one."""
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def check_flag(value: str) -> None:
    """At launch, in the launching process (which must not open a CUDA context: it would hold GPU
    memory the scheduler sizes its pools by): ValueError naming the flag for a value that is not
    ``auto``, ``none`` or a readable table, or for a table where no CUDA GPU is. Whether the table
    was measured on this GPU is checked where the scheduler loads it (:func:`table_path`)."""
    if value not in (AUTO, NONE):
        load_table(_named_file(value, cuda=torch.cuda.is_available()))
