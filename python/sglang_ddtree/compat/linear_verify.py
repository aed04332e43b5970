"""GatedDeltaNet layers of a DDTREE verify through the snapshot-free tree kernels
(``--speculative-ddtree-gdn-mode wy``).

sglang 0.5.17 has no per-algorithm linear-attention verify. An AROUND hook on
``HybridLinearAttnBackend.forward_extend`` (the dispatcher in front of the GDN backend; its module
imports on every platform) sends the linear-attention layers of a target verify on a wy DDTREE
server to ``engine.tree_gdn`` (the workspace holds the step's tree); full-attention layers, other
forward modes and other servers go to sglang.
"""

from __future__ import annotations

import functools

from ..engine import tree_gdn
from ..server_args import wy_server

TARGET = "sglang.srt.layers.attention.hybrid_linear_attn_backend.HybridLinearAttnBackend.forward_extend"


def _forward_extend(original, self, layer, forward_batch, save_kv_cache=True, q=None, k=None, v=None,
                    mixed_qkv=None, a=None, b=None, **kwargs):
    if (not forward_batch.forward_mode.is_target_verify() or self._is_full_attn(layer, kwargs.get("layer_id"))
            or not wy_server()):
        return original(self, layer, forward_batch, save_kv_cache, q, k, v, mixed_qkv, a, b, **kwargs)
    linear = self.linear_attn_backend
    if type(linear).__name__ != "GDNAttnBackend":
        raise NotImplementedError(f"--speculative-ddtree-gdn-mode wy supports GatedDeltaNet layers, not "
                                  f"{type(linear).__name__}; use --speculative-ddtree-gdn-mode snapshot.")
    ws = tree_gdn.workspace()
    if not tree_gdn.cross_check_enabled():
        return ws.verify_layer(linear, layer, mixed_qkv, a, b)
    sglang_verify = functools.partial(original, self, layer, forward_batch, save_kv_cache, q, k, v, mixed_qkv, a, b,
                                      **kwargs)
    return ws.verify_layer_checked(sglang_verify, linear, layer, mixed_qkv, a, b)


def register_linear_verify_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _forward_extend, HookType.AROUND)
