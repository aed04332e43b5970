"""CUDA-graph replay of the DDTREE tree verify, with the tree mask (developer preview).

sglang 0.5.17 captures the DFlash-family target-verify graph with ``custom_mask=None`` for the
triton / flashinfer / fa3 backends (``resolve_dflash_verify_mask_policy``: a chain needs no
mask), so the captured attention kernels are the causal ones and a replay would drop a tree's
mask silently. Until this path is verified on a GPU, DDTREE verifies run eagerly
(``registration._no_graph_for_tree_verify``). With ``SGLANG_DDTREE_VERIFY_CUDA_GRAPH=1``:

- the target's capture-time verify input carries the runner's mask buffer (hook below), so the
  captured kernels read a mask, and sglang's replay copies each step's
  ``spec_info.custom_mask`` (our FULL_MASK layout) into the backend's verify-mask buffer;
- DDTREE verifies may replay (the guard lets them through) and ``DDTreeVerifyInput``
  prepares them the way DFLASH's does (``load_batch`` when the graph can run).

``SGLANG_DDTREE_VERIFY_CUDA_GRAPH_NOMASK_CONTROL=1`` keeps sglang's mask-less capture: the
negative control of the GPU test that shows the mask is really applied (it must mismatch).
"""

from __future__ import annotations

import copy
import os

GRAPH_ENV = "SGLANG_DDTREE_VERIFY_CUDA_GRAPH"
NOMASK_CONTROL_ENV = "SGLANG_DDTREE_VERIFY_CUDA_GRAPH_NOMASK_CONTROL"
_TARGET = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner.get_spec_info"


def tree_verify_graphs_enabled() -> bool:
    return os.environ.get(GRAPH_ENV) == "1"


def _capture_with_mask(result, self, num_tokens, *args, **kwargs):
    from ..server_args import is_ddtree_server

    if (not tree_verify_graphs_enabled() or os.environ.get(NOMASK_CONTROL_ENV) == "1"
            or self.model_runner.is_draft_worker or result is None or not is_ddtree_server()):
        return result
    if getattr(result, "custom_mask", None) is None:
        result = copy.copy(result)
        result.custom_mask = self.buffers.custom_mask
    return result


def register_verify_graph_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _capture_with_mask, HookType.AFTER)
