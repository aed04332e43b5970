"""Tree verify on hybrid (GatedDeltaNet / Mamba) targets through sglang's per-node state path.

sglang 0.5.17 verifies EAGLE trees on hybrid targets like this: in TARGET_VERIFY the linear
attention layers read ``spec_info.retrieve_next_token`` / ``retrieve_next_sibling`` (first
child / next sibling per verify position, -1 = none; parents before children), the fused conv
kernel derives each node's parent from them, and the GDN verify kernel runs every node from its
parent's intermediate state, storing one state per node (no in-place update). After acceptance,
``update_mamba_state_after_mtp_verify`` copies the last accepted node's intermediate state into
the request's state slot.

The linear-attention backends switch that tree handling on only when
``server_args.speculative_eagle_topk > 1`` (``MambaAttnBackendBase.__init__`` copies it to
``self.topk``), which DDTREE leaves at DFLASH's 1 because every other part of sglang reads
``speculative_eagle_topk`` as EAGLE's per-step branching. The hook below raises only the
backend's copy, for the target model of a DDTREE server, so nothing else sees a different
top-k. This is ``--speculative-ddtree-gdn-mode snapshot``.
"""

from __future__ import annotations

_TARGET = "sglang.srt.layers.attention.hybrid_linear_attn_backend.MambaAttnBackendBase.__init__"

# Any value > 1 selects the tree path; the backends use it only as that switch.
TREE_TOPK = 2


def _tree_switch(result, self, model_runner, *args, **kwargs):
    from ..server_args import is_ddtree

    if is_ddtree(model_runner.server_args) and not model_runner.is_draft_worker:
        self.topk = max(int(self.topk or 0), TREE_TOPK)
    return result


def register_hybrid_tree_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _tree_switch, HookType.AFTER)
    register_conv_window_hooks()


# --------------------------------------------------------------------------- conv windows
#
# sglang 0.5.17's mamba pool stores the per-verify-position conv windows in a *deduplicated
# sliding-window* layout whenever ``speculative_eagle_topk <= 1`` (which DDTREE keeps, see
# above): position t's window is the overlapping slice ``shared[..., t : t + K - 1]``. That is
# only right for a chain, where position t's window is position t-1's shifted by one. In a tree,
# a node's window holds *its* ancestors, so the overlapping stores of later nodes overwrite
# earlier nodes' windows (e.g. a second child of the root writes the root's own column with an
# older state column) and the commit then restores a wrong conv state. This was the hybrid
# bushy-tree mismatch of session 2 (RESULTS.md). sglang has no per-algorithm switch for the
# layout, so this narrow hook answers "not safe" for DDTREE servers: the pool keeps dense,
# independent windows (the layout EAGLE tree verify uses).

_DEDUP_TARGET = "sglang.srt.mem_cache.memory_pool.conv_window_dedup_enabled"


def _dense_conv_windows_for_trees(original, *args, **kwargs):
    from ..server_args import is_ddtree_server

    if is_ddtree_server():
        return False
    return original(*args, **kwargs)


def register_conv_window_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_DEDUP_TARGET, _dense_conv_windows_for_trees, HookType.AROUND)
