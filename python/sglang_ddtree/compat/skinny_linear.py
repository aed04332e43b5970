"""A DDTREE server's few-token linear layers through ``kernels/skinny_gemm.py``, where a table
measured that kernel faster than cuBLAS on this GPU (``--speculative-ddtree-gemm-table``).

sglang's ``UnquantizedLinearMethod.apply(layer, x, bias)`` computes ``F.linear(x, layer.weight,
bias)`` (cuBLAS) for every bf16 / fp16 linear layer of the target and the drafter. A table is
``benchmark/ddtree/bench_skinny_gemm.py``'s JSON: ``meta.device`` (the GPU it was measured on)
and per row ``m``, ``n``, ``k``, ``act``, ``best`` (a
:meth:`~sglang_ddtree.kernels.skinny_gemm.Config.name`) and ``best_vs_cublas``. An AROUND hook on
that method sends a product to ``skinny_linear`` with the row's tiling when all hold:

- this process serves DDTREE (the flag is resolved from the server args the scheduler publishes,
  once per process: a scheduler process serves one engine);
- the table has a row for ``(tokens, N, K, act)`` whose tiling took at most ``MAX_RATIO`` of
  sglang's time;
- ``x`` is a 2-D CUDA tensor of the weight's dtype, both contiguous along K.

Rows with ``act: "silu_mul"`` (the down projection with the MLP's activation inside it) serve
through a second AROUND hook, on ``Qwen2MoeMLP.forward`` (the dense MLP of sglang's Qwen3.5
layers): where the table has such a row for the layer's down projection and its activation is
``SiluAndMul``, it passes the gate_up output ``[T, 2K]`` straight to ``down_proj`` and marks that
layer for the product, so ``down_proj``'s own forward (its tensor-parallel reduction included)
runs around ``skinny_linear(..., act="silu_mul")``.

A third AROUND hook, on ``LogitsProcessor._compute_lm_head``, serves the target's lm_head where
sglang would compute ``matmul(hidden.to(weight.dtype), weight.T)`` in the weight's dtype (no LoRA,
no quantized or fp32 head, no bias) and the table has its row. The drafter's top-K head calls
:func:`linear` itself.

Everything else goes to sglang. The flag's values:

- ``auto``: the table shipped for this GPU's name (``kernels/gemm_table.py``); where none ships,
  sglang's path everywhere (logged at start);
- ``none``: sglang's path everywhere;
- a path: that table; refused at launch when unreadable, malformed, or measured on another GPU.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Dict, Optional

import torch

from ..kernels.gemm_table import AUTO, FLAG, MAX_RATIO, NONE, Key, device_name, load_table, table_path
from ..kernels.skinny_gemm import SILU_MUL, Config

TARGET = "sglang.srt.layers.quantization.unquant.UnquantizedLinearMethod.apply"
MLP_TARGET = "sglang.srt.models.qwen2_moe.Qwen2MoeMLP.forward"
LM_HEAD_TARGET = "sglang.srt.layers.logits_processor.LogitsProcessor._compute_lm_head"
logger = logging.getLogger(__name__)
ROUTE_LOG = "skinny_linear: (tokens, N, K, act) = %s through %s"
_TABLE: Dict[Key, Config] = {}  # the active table (empty: sglang's path everywhere)
_RESOLVED = [False]  # whether this process resolved the flag (from the published server args)
_ROUTED: Dict[Key, Config] = {}  # what this process sent to the kernel, logged once per key
_FUSED_LAYER: contextvars.ContextVar = contextvars.ContextVar("ddtree_silu_mul_layer", default=None)


def _active_table() -> Dict[Key, Config]:
    """The table this process serves with; resolved from the published server args on the first
    product after they are published (until then, and on a server not serving DDTREE: empty)."""
    if not _RESOLVED[0]:
        from ..server_args import is_ddtree, published_server_args

        sa = published_server_args()
        if sa is None:
            return _TABLE
        _RESOLVED[0] = True
        _TABLE.clear()
        if is_ddtree(sa):
            _TABLE.update(_load_for_server(getattr(sa, "speculative_ddtree_gemm_table", None) or AUTO))
    return _TABLE


def _load_for_server(value: str) -> Dict[Key, Config]:
    device = device_name()
    path = table_path(value, device)
    if path is None:
        logger.info("DDTREE: linear layers through cuBLAS (sglang's path): %s", f"{FLAG} {NONE}" if value == NONE else
                    f"no few-token GEMM table ships for {device!r}; benchmark/ddtree/bench_skinny_gemm.py "
                    f"measures one for {FLAG} PATH")
        return {}
    table = load_table(path, device)
    logger.info("DDTREE: few-token GEMM table %s (%s): the kernel serves %d (tokens, N, K, act) products "
                "where it measured at least %.0f%% faster than cuBLAS on %s", path, value, len(table),
                100 * (1 - MAX_RATIO), device)
    return table


def tiling_for(x: torch.Tensor, weight: torch.Tensor, act: Optional[str] = None) -> Optional[Config]:
    """The table's tiling for ``x @ weight.T`` (``act``: x is ``[T, 2K]`` gate | up, module
    docstring), or None where sglang's path serves it."""
    if x.dim() != 2 or not x.is_cuda or x.dtype != weight.dtype or weight.dim() != 2:
        return None
    if x.stride(1) != 1 or weight.stride(1) != 1:
        return None
    if x.shape[1] != (2 if act else 1) * weight.shape[1]:
        return None
    table = _active_table()
    return table.get((x.shape[0], weight.shape[0], weight.shape[1], act)) if table else None


def _apply(original, self, layer, x, bias=None):
    act = SILU_MUL if _FUSED_LAYER.get() is layer else None
    cfg = tiling_for(x, layer.weight, act)
    if cfg is None:
        if act is not None:  # the MLP hook checked this product's row: not reached
            raise RuntimeError(f"skinny_linear: no tiling for the fused down projection of {tuple(x.shape)}")
        return original(self, layer, x, bias)
    return _run(x, layer.weight, bias, cfg, act)


def _run(x, weight, bias, cfg: Config, act: Optional[str] = None) -> torch.Tensor:
    """The kernel with the table's tiling; each product logged the first time it is routed."""
    from ..kernels.skinny_gemm import skinny_linear

    key = (x.shape[0], weight.shape[0], weight.shape[1], act)
    if key not in _ROUTED:
        _ROUTED[key] = cfg
        logger.info(ROUTE_LOG, key, cfg.name())
    return skinny_linear(x, weight, bias, cfg, act=act)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` (no bias) for a product this package calls itself (the drafter's top-K
    head): the table's tiling where it has a row for it, else ``F.linear``."""
    cfg = tiling_for(x, weight)
    return torch.nn.functional.linear(x, weight) if cfg is None else _run(x, weight, None, cfg)


def active() -> bool:
    """Whether this process serves with a table (``/server_info`` reports the routed products)."""
    return bool(_TABLE)


def routed() -> Dict[Key, Config]:
    """The products this process has sent to the kernel so far, ``{(tokens, N, K, act): Config}``
    (``/server_info``'s ``ddtree.skinny_gemm_routed``, metrics.py)."""
    return dict(_ROUTED)


def _mlp_forward(original, self, x, *args, **kwargs):
    if not isinstance(x, torch.Tensor) or not x.is_cuda or args or kwargs:
        return original(self, x, *args, **kwargs)
    down = getattr(self, "down_proj", None)
    table = _active_table()
    fused = (
        table and down is not None and x.dim() == 2
        and type(getattr(self, "act_fn", None)).__name__ == "SiluAndMul"
        and type(getattr(down, "quant_method", None)).__name__ == "UnquantizedLinearMethod"
        and (x.shape[0], down.weight.shape[0], down.weight.shape[1], SILU_MUL) in table
        and x.dtype == down.weight.dtype
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


def _lm_head(original, self, hidden_states, lm_head, embedding_bias=None, **kwargs):
    w = getattr(lm_head, "weight", None)
    plain = (
        isinstance(w, torch.Tensor) and w.is_cuda and embedding_bias is None and _active_table()
        and not hasattr(lm_head, "set_lora") and not getattr(self, "use_fp32_lm_head", False)
        and not getattr(self, "use_fp32_lm_head_output", False)
        and getattr(self, "rl_on_policy_target", None) is None
    )
    if plain:
        from sglang.srt.layers.logits_processor import should_apply_lm_head_quant_method

        plain = not should_apply_lm_head_quant_method(lm_head, getattr(lm_head, "quant_method", None))
    x = hidden_states.to(w.dtype) if plain else None
    cfg = tiling_for(x, w) if plain else None
    if cfg is None:
        return original(self, hidden_states, lm_head, embedding_bias, **kwargs)
    return _run(x, w, None, cfg)


def set_table(table: Dict[Key, Config]) -> None:
    """Serve with ``table`` from now on in this process, as if the flag had named it (tests and
    benchmarks that call the hooks directly); an empty dict: sglang's path again."""
    _TABLE.clear()
    _TABLE.update(table)
    _RESOLVED[0] = True
    _ROUTED.clear()


def register_skinny_linear_hook() -> None:
    """Registers the three hooks (GPU engines; inert where the flag resolves to no table)."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _apply, HookType.AROUND)
    HookRegistry.register(MLP_TARGET, _mlp_forward, HookType.AROUND)
    HookRegistry.register(LM_HEAD_TARGET, _lm_head, HookType.AROUND)
