"""A DDTREE server's linear layers at few tokens through ``kernels/skinny_gemm.py`` (developer
switch ``SGLANG_DDTREE_SKINNY_GEMM``, for the in-engine A/B of that kernel).

sglang's ``UnquantizedLinearMethod.apply(layer, x, bias)`` computes ``F.linear(x, layer.weight,
bias)`` (cuBLAS) for every bf16 linear layer of the target and the drafter. With the switch naming
a table (``benchmark/ddtree/bench_skinny_gemm.py``'s JSON: per row ``m``, ``n``, ``k``, ``best``
(a :class:`~sglang_ddtree.kernels.skinny_gemm.Config` name) and ``best_vs_cublas``), an AROUND hook
on that method sends a product to ``skinny_linear`` with the row's tiling when all hold:

- this process serves DDTREE (another engine in the same process keeps sglang's path);
- the table has a row for ``(tokens, N, K)`` whose tiling took at most ``MAX_RATIO`` of cuBLAS's
  time;
- ``x`` is a 2-D CUDA tensor of the weight's dtype (bf16 / fp16), both contiguous along K.

Everything else goes to sglang. The table is read once per process; a missing or malformed table
raises ValueError naming the variable when the hook is registered (at plugin load), not mid-serve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Optional, Tuple

import torch

from ..config import SKINNY_GEMM
from ..kernels.skinny_gemm import MAX_M, Config

TARGET = "sglang.srt.layers.quantization.unquant.UnquantizedLinearMethod.apply"
MAX_RATIO = 0.98  # a tiling is used only where it measured at least 2% faster than cuBLAS

_TABLE: Dict[Tuple[int, int, int], Config] = {}


def parse_config(name: str) -> Config:
    """``Config.name()``'s inverse: ``"bn64_bk128_sk2_st4_w4"`` -> Config. ValueError otherwise."""
    fields = dict(BN="bn", BK="bk", split_k="sk", num_stages="st", num_warps="w")
    parts = name.split("_")
    if len(parts) != len(fields):
        raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
    values = {}
    for (key, tag), part in zip(fields.items(), parts):
        if not part.startswith(tag) or not part[len(tag):].isdigit():
            raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
        values[key] = int(part[len(tag):])
    return Config(**values)


def load_table(path: Path) -> Dict[Tuple[int, int, int], Config]:
    """``{(m, n, k): Config}`` of the rows of ``path`` whose best tiling beat cuBLAS by the margin."""
    try:
        rows = json.loads(Path(path).read_text())["rows"]
        table = {}
        for r in rows:
            if r.get("best") and float(r["best_vs_cublas"]) <= MAX_RATIO and 1 <= int(r["m"]) <= MAX_M:
                table[(int(r["m"]), int(r["n"]), int(r["k"]))] = parse_config(r["best"])
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{SKINNY_GEMM.name}={path}: not a bench_skinny_gemm.py table ({e})") from e
    return table


def tiling_for(x: torch.Tensor, weight: torch.Tensor) -> Optional[Config]:
    """The table's tiling for ``x @ weight.T``, or None where sglang's path serves it."""
    if not _TABLE or x.dim() != 2 or not x.is_cuda or x.dtype != weight.dtype or weight.dim() != 2:
        return None
    if x.stride(1) != 1 or weight.stride(1) != 1:
        return None
    return _TABLE.get((x.shape[0], weight.shape[0], weight.shape[1]))


def _apply(original, self, layer, x, bias=None):
    cfg = tiling_for(x, layer.weight)
    if cfg is None or not _serving_ddtree():
        return original(self, layer, x, bias)
    from ..kernels.skinny_gemm import skinny_linear

    return skinny_linear(x, layer.weight, bias, cfg)


def _serving_ddtree() -> bool:
    from ..server_args import is_ddtree_server

    return is_ddtree_server()


def register_skinny_linear_hook() -> bool:
    """Registers the hook when the switch names a table; returns whether it did."""
    path = SKINNY_GEMM.get()
    if not path:
        return False
    _TABLE.clear()
    _TABLE.update(load_table(Path(path)))
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _apply, HookType.AROUND)
    return True
