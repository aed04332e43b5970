"""Dense per-node conv windows in sglang's mamba pool for DDTREE servers.

sglang 0.5.17's mamba pool stores the per-verify-position conv windows in a deduplicated
sliding-window layout whenever ``speculative_eagle_topk <= 1`` (which DDTREE keeps): position t's
window is the overlapping slice ``shared[..., t : t + K - 1]``. That is only right for a chain,
where position t's window is position t-1's shifted by one. In a tree a node's window holds its
own ancestors, so later nodes' overlapping stores overwrite earlier nodes' windows and the
snapshot-mode commit would restore a wrong conv state. sglang has no per-algorithm switch for the
layout (``memory_pool.conv_window_dedup_enabled``); an AROUND hook answers "not enabled" on DDTREE
servers, so the pool keeps dense, independent windows (EAGLE's tree layout).
"""

from __future__ import annotations

from ..server_args import is_ddtree_server

TARGET = "sglang.srt.mem_cache.memory_pool.conv_window_dedup_enabled"


def _dense_conv_windows_for_trees(original, *args, **kwargs):
    if is_ddtree_server():
        return False
    return original(*args, **kwargs)


def register_conv_window_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _dense_conv_windows_for_trees, HookType.AROUND)
