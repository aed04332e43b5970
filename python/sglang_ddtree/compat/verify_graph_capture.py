"""The tree mask (and, on wy hybrid targets, the tree buffers) in DDTREE's captured verify graphs.

sglang 0.5.17 builds the capture-time verify input of the DFlash family in
``DecodeCudaGraphRunner.get_spec_info`` with ``custom_mask=None`` (a chain needs no mask), so a
captured tree verify would silently ignore the tree mask. An AFTER hook hands that input to
``engine.verify_graph.capture_spec_info``, which gives it the runner's mask buffer on DDTREE
targets (and sets up the tree GatedDeltaNet buffers of the captured width); everything else is
returned unchanged.
"""

from __future__ import annotations

from ..engine import verify_graph

TARGET = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner.get_spec_info"


def _after_get_spec_info(result, self, num_tokens, *args, **kwargs):
    return verify_graph.capture_spec_info(self, result, num_tokens)


def register_verify_graph_capture_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _after_get_spec_info, HookType.AFTER)
