"""Tree mode of sglang's linear-attention backend for DDTREE in ``--speculative-ddtree-gdn-mode
snapshot`` (sglang's per-node state path).

sglang 0.5.17 verifies EAGLE trees on hybrid targets like this: in TARGET_VERIFY the linear
attention layers read ``spec_info.retrieve_next_token`` / ``retrieve_next_sibling`` (first child /
next sibling per verify position, -1 = none), the conv kernel derives each node's parent from
them, and the GDN verify kernel runs every node from its parent's intermediate state, storing one
state per node; after acceptance ``update_mamba_state_after_mtp_verify`` copies the last accepted
node's state into the request's slot.

The backends switch that tree handling on only when ``server_args.speculative_eagle_topk > 1``
(``MambaAttnBackendBase.__init__`` copies it to ``self.topk``), which DDTREE leaves at DFLASH's 1
because the rest of sglang reads it as EAGLE's per-step branching. An AFTER hook raises only the
backend's copy, for the target model of a DDTREE server, so nothing else sees another top-k.
"""

from __future__ import annotations

from ..server_args import is_ddtree

TARGET = "sglang.srt.layers.attention.hybrid_linear_attn_backend.MambaAttnBackendBase.__init__"

# Any value > 1 selects the tree path; the backends use it only as that switch.
TREE_TOPK = 2


def _tree_switch(result, self, model_runner, *args, **kwargs):
    if is_ddtree(model_runner.server_args) and not model_runner.is_draft_worker:
        self.topk = max(int(self.topk or 0), TREE_TOPK)
    return result


def register_linear_tree_mode_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _tree_switch, HookType.AFTER)
