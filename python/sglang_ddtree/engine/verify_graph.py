"""CUDA-graph replay of the DDTREE tree verify, with the tree mask (the default; off with
``--speculative-ddtree-eager-verify``).

sglang captures the DFlash-family target-verify graph with ``custom_mask=None`` (a chain needs
no mask), so the captured attention kernels would be the causal ones and a replay would drop a
tree's mask silently. For DDTREE:

- the target's capture-time verify input carries the graph runner's mask buffer
  (:func:`capture_spec_info`), so the captured kernels read a mask, and sglang's replay copies
  each step's ``custom_mask`` (FULL_MASK layout) into that buffer;
- on hybrid targets in wy mode the captured GatedDeltaNet layers read the tree from the
  workspace's static buffers of the graph's width (``engine/tree_gdn.py``), which each step
  fills before its forward;
- in snapshot mode sglang's linear backend in tree mode captures its per-node kernels with
  static first-child / next-sibling buffers and copies each step's links into them.

With ``--speculative-ddtree-eager-verify`` no DDTREE verify replays a graph
(``compat/graph_guard.py``), and the target's verify graphs are not captured at all
(:func:`skip_target_capture`): they would never be replayed.
"""

from __future__ import annotations

import copy

from ..server_args import eager_verify, is_ddtree, is_ddtree_server, wy_server
from . import tree_gdn


def capture_spec_info(runner, spec_info, num_tokens: int):
    """The capture-time verify input of ``runner`` (a target DecodeCudaGraphRunner of a DDTREE
    server) for ``num_tokens`` tokens: a copy of ``spec_info`` with the runner's mask buffer;
    on a wy hybrid target the graph's tree buffers are set up. Anything else is returned as is."""
    if (spec_info is None or runner.model_runner.is_draft_worker or not is_ddtree_server()
            or eager_verify()):
        return spec_info
    spec_info = copy.copy(spec_info)
    if getattr(spec_info, "custom_mask", None) is None:
        spec_info.custom_mask = runner.buffers.custom_mask
    if wy_server() and is_hybrid_runner(runner.model_runner):
        width = int(runner.captured_req_width)
        tree_gdn.workspace().begin_capture(num_tokens // width, width, int(runner.max_bs),
                                           runner.buffers.input_ids.device)
    return spec_info


def is_hybrid_runner(model_runner) -> bool:
    """Whether the model runner's attention backend has linear-attention layers."""
    return getattr(getattr(model_runner, "attn_backend", None), "linear_attn_backend", None) is not None


def skip_target_capture(model_runner) -> bool:
    """Whether the target's verify graphs are left uncaptured: a DDTREE target with eager verifies."""
    return not model_runner.is_draft_worker and is_ddtree(model_runner.server_args) \
        and eager_verify(model_runner.server_args)
