"""DDTREE's one hook on ``ModelRunner.init_cuda_graphs`` (sglang has no seam for either part):

- with ``--speculative-ddtree-eager-verify`` the target's verify graphs, which no DDTREE verify
  would replay, are not captured (``engine.verify_graph.skip_target_capture``);
- under budget auto the target's own verify runner is captured only for the batch sizes its
  width can be chosen at, with buffers shared by every width's graphs
  (``engine.verify_widths.width_capped_capture``).

One composed AROUND hook: sglang warns on every target with several AROUND hooks.
"""

from __future__ import annotations

import logging

from ..engine.verify_graph import skip_target_capture
from ..engine.verify_widths import width_capped_capture

logger = logging.getLogger(__name__)

TARGET = "sglang.srt.model_executor.model_runner.ModelRunner.init_cuda_graphs"


def init_cuda_graphs(original, self, *args, **kwargs):
    if skip_target_capture(self):
        logger.info("DDTREE: eager tree verify; the target's verify CUDA graphs are not captured")
        kwargs["capture_decode_cuda_graph"] = False
        args = ()
    with width_capped_capture(self):
        return original(self, *args, **kwargs)


def register_graph_init_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, init_cuda_graphs, HookType.AROUND)
