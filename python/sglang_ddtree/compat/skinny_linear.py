"""A DDTREE server's linear layers at few tokens through ``kernels/skinny_gemm.py`` (developer
switch ``SGLANG_DDTREE_SKINNY_GEMM``, for the in-engine A/B of that kernel).

sglang's ``UnquantizedLinearMethod.apply(layer, x, bias)`` computes ``F.linear(x, layer.weight,
bias)`` (cuBLAS) for every bf16 linear layer of the target and the drafter. With the switch naming
a table (``benchmark/ddtree/bench_skinny_gemm.py``'s JSON: per row ``m``, ``n``, ``k``, ``act``,
``best`` (a :meth:`~sglang_ddtree.kernels.skinny_gemm.Config.name`) and ``best_vs_cublas``), an
AROUND hook on that method sends a product to ``skinny_linear`` with the row's tiling when all hold:

- this process serves DDTREE (another engine in the same process keeps sglang's path);
- the table has a row for ``(tokens, N, K, act)`` whose tiling took at most ``MAX_RATIO`` of
  sglang's time;
- ``x`` is a 2-D CUDA tensor of the weight's dtype (bf16 / fp16), both contiguous along K.

Rows with ``act: "silu_mul"`` (the down projection with the MLP's activation inside it) serve
through a second AROUND hook, on ``Qwen2MoeMLP.forward`` (the dense MLP of sglang's Qwen3.5
layers): where the table has such a row for the layer's down projection and its activation is
``SiluAndMul``, it passes the gate_up output ``[T, 2K]`` straight to ``down_proj`` and marks that
layer for the product, so ``down_proj``'s own forward (its tensor-parallel reduction included)
runs around ``skinny_linear(..., act="silu_mul")``.

Everything else goes to sglang. The table is read once per process; a missing or malformed table
raises ValueError naming the variable when the hook is registered (at plugin load), not mid-serve.
"""

from __future__ import annotations

import contextvars
import json
import logging
from pathlib import Path
from typing import Dict, Optional, Tuple

import torch

from ..config import SKINNY_GEMM
from ..kernels.skinny_gemm import ACTS, MAX_M, SILU_MUL, Config

TARGET = "sglang.srt.layers.quantization.unquant.UnquantizedLinearMethod.apply"
MLP_TARGET = "sglang.srt.models.qwen2_moe.Qwen2MoeMLP.forward"
logger = logging.getLogger(__name__)
ROUTE_LOG = "skinny_linear: (tokens, N, K, act) = %s through %s"
MAX_RATIO = 0.98  # a tiling is used only where it measured at least 2% faster than sglang's path

Key = Tuple[int, int, int, Optional[str]]  # (tokens, N, K, act)
_TABLE: Dict[Key, Config] = {}
_ROUTED: Dict[Key, Config] = {}  # what this process sent to the kernel, logged once per key
_FUSED_LAYER: contextvars.ContextVar = contextvars.ContextVar("ddtree_silu_mul_layer", default=None)


def load_table(path: Path) -> Dict[Key, Config]:
    """``{(m, n, k, act): Config}`` of the rows of ``path`` whose best tiling beat sglang's path by
    the margin."""
    try:
        rows = json.loads(Path(path).read_text())["rows"]
        table = {}
        for r in rows:
            act = r.get("act")
            if act not in ACTS:
                raise ValueError(f"act {act!r}")
            if r.get("best") and float(r["best_vs_cublas"]) <= MAX_RATIO and 1 <= int(r["m"]) <= MAX_M:
                table[(int(r["m"]), int(r["n"]), int(r["k"]), act)] = Config.from_name(r["best"])
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{SKINNY_GEMM.name}={path}: not a bench_skinny_gemm.py table ({e})") from e
    return table


def tiling_for(x: torch.Tensor, weight: torch.Tensor, act: Optional[str] = None) -> Optional[Config]:
    """The table's tiling for ``x @ weight.T`` (``act``: x is ``[T, 2K]`` gate | up, module
    docstring), or None where sglang's path serves it."""
    if not _TABLE or x.dim() != 2 or not x.is_cuda or x.dtype != weight.dtype or weight.dim() != 2:
        return None
    if x.stride(1) != 1 or weight.stride(1) != 1:
        return None
    if x.shape[1] != (2 if act else 1) * weight.shape[1]:
        return None
    return _TABLE.get((x.shape[0], weight.shape[0], weight.shape[1], act))


def _apply(original, self, layer, x, bias=None):
    act = SILU_MUL if _FUSED_LAYER.get() is layer else None
    cfg = tiling_for(x, layer.weight, act)
    if cfg is None or not _serving_ddtree():
        if act is not None:  # the MLP hook checked this product's row: not reached
            raise RuntimeError(f"skinny_linear: no tiling for the fused down projection of {tuple(x.shape)}")
        return original(self, layer, x, bias)
    from ..kernels.skinny_gemm import skinny_linear

    key = (x.shape[0], layer.weight.shape[0], layer.weight.shape[1], act)
    if key not in _ROUTED:
        _ROUTED[key] = cfg
        logger.info(ROUTE_LOG, key, cfg.name())
    return skinny_linear(x, layer.weight, bias, cfg, act=act)


def routed() -> Dict[Key, Config]:
    """The products this process has sent to the kernel so far, ``{(tokens, N, K, act): Config}``
    (``/server_info``'s ``ddtree.skinny_gemm_routed``, metrics.py)."""
    return dict(_ROUTED)


def _mlp_forward(original, self, x, *args, **kwargs):
    down = getattr(self, "down_proj", None)
    fused = (
        not args and not kwargs and down is not None and isinstance(x, torch.Tensor) and x.dim() == 2
        and type(getattr(self, "act_fn", None)).__name__ == "SiluAndMul"
        and type(getattr(down, "quant_method", None)).__name__ == "UnquantizedLinearMethod"
        and (x.shape[0], down.weight.shape[0], down.weight.shape[1], SILU_MUL) in _TABLE
        and x.is_cuda and x.dtype == down.weight.dtype and _serving_ddtree()
    )
    if not fused:
        return original(self, x, *args, **kwargs)
    gate_up, _ = self.gate_up_proj(x)
    token = _FUSED_LAYER.set(down)
    try:
        out, _ = down(gate_up)
    finally:
        _FUSED_LAYER.reset(token)
    return out


def _serving_ddtree() -> bool:
    from ..server_args import is_ddtree_server

    return is_ddtree_server()


def register_skinny_linear_hook() -> bool:
    """Registers the hook when the switch names a table; returns whether it did."""
    path = SKINNY_GEMM.get()
    if not path:
        return False
    _TABLE.clear()
    _ROUTED.clear()
    _TABLE.update(load_table(Path(path)))
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _apply, HookType.AROUND)
    if any(key[3] == SILU_MUL for key in _TABLE):
        HookRegistry.register(MLP_TARGET, _mlp_forward, HookType.AROUND)
    return True
