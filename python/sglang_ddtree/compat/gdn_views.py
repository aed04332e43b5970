"""A GatedDeltaNet layer of a wy DDTREE verify reads its projections in place.

sglang 0.5.17's ``Qwen3_5GatedDeltaNet.forward`` turns the ``[T, q | k | v | z]`` and
``[T, b | a]`` projections into contiguous ``mixed_qkv``, ``z``, ``b`` and ``a`` before the core
attention: one fused kernel where value heads / key heads is 1, 2 or 4, and otherwise (Qwen3.6-27B:
48 / 16 = 3) two ``.contiguous()`` copies and a ``torch.cat``, and after it a copy of ``z`` for the
gated norm. The tree kernels of a wy verify read all four through their strides (``tree_conv``
takes ``mixed_qkv`` rows any distance apart; ``tree_gdn_verify`` takes ``a`` / ``b`` sharing one
row stride), and ``kernels/gated_norm`` reads ``z`` in place.

An AROUND hook on that forward serves a TARGET_VERIFY forward of a wy DDTREE server (outside the
developer cross-check, whose sglang verify wants contiguous inputs) as: the projections
(sglang's ``_forward_input_proj``), column views of them, the layer's core attention (which the
linear-verify hook sends to the tree kernels), the gated norm on the views, ``out_proj``. Same
values as sglang's path: the views hold what its copies would, and the norm is its formula.
Every other forward, and any layer whose norm is not the per-head RMS form before the gate,
goes to sglang, as does every forward under ``SGLANG_DDTREE_GDN_COPIES`` (developer: the A/B
of this path). Registered off sglang's CPU engine only: there ``models/qwen3_5.py`` does not
import (it needs a CPU kernel sgl-kernel lacks), and the tree kernels are Triton.
"""

from __future__ import annotations

import torch

from ..config import GDN_COPIES
from ..engine import tree_gdn
from ..kernels.gated_norm import ACTIVATIONS, gated_rmsnorm
from ..server_args import wy_server

TARGET = "sglang.srt.models.qwen3_5.Qwen3_5GatedDeltaNet.forward"


def serves_in_place(layer, hidden_states, forward_batch) -> bool:
    """Whether ``layer``'s forward takes the in-place path (module docstring)."""
    norm = getattr(layer, "norm", None)
    return (
        isinstance(hidden_states, torch.Tensor)
        and forward_batch.forward_mode.is_target_verify()
        and wy_server()
        and not tree_gdn.cross_check_enabled()
        and not GDN_COPIES.get()
        and norm is not None
        and getattr(norm, "group_size", None) is None
        and getattr(norm, "norm_before_gate", False)
        and getattr(norm, "bias", None) is None
        and getattr(norm, "activation", "swish") in ACTIVATIONS
        and tuple(norm.weight.shape) == (layer.head_v_dim,)
    )


def projection_views(layer, qkvz: torch.Tensor, ba: torch.Tensor):
    """``(mixed_qkv [T, 2 Kd + Vd], z [T, HV, V], b [T, HV], a [T, HV])``: column views of the
    projections ``qkvz [T, q | k | v | z]`` and ``ba [T, b | a]`` of this rank's heads."""
    tp = layer.attn_tp_size
    k_tp, v_tp, nv = layer.key_dim // tp, layer.value_dim // tp, layer.num_v_heads // tp
    if qkvz.shape[-1] != 2 * k_tp + 2 * v_tp or ba.shape[-1] != 2 * nv:
        raise ValueError(f"GatedDeltaNet projections of {qkvz.shape[-1]} / {ba.shape[-1]} columns, expected "
                         f"{2 * k_tp + 2 * v_tp} / {2 * nv}")
    qkv = 2 * k_tp + v_tp
    z = qkvz[:, qkv:].unflatten(-1, (nv, layer.head_v_dim))
    return qkvz[:, :qkv], z, ba[:, :nv], ba[:, nv:]


def _forward(original, self, hidden_states, forward_batch):
    if not serves_in_place(self, hidden_states, forward_batch):
        return original(self, hidden_states, forward_batch)
    qkvz, ba = self._forward_input_proj(hidden_states)
    mixed_qkv, z, b, a = projection_views(self, qkvz, ba)
    core = self.attn(forward_batch, mixed_qkv=mixed_qkv, a=a, b=b)
    norm = self.norm
    y = gated_rmsnorm(core.reshape(z.shape), z, norm.weight, norm.eps, getattr(norm, "activation", "swish"))
    output, _ = self.out_proj(y)
    return output


def register_gdn_views_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _forward, HookType.AROUND)
