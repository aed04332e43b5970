"""No CUDA-graph replay for a DDTREE tree verify under ``--speculative-ddtree-eager-verify``.

sglang decides per forward whether a captured graph can run (``can_run_graph`` of the decode and
prefill graph runners) and has no per-algorithm switch for it. An AROUND hook answers False for a
forward carrying a :class:`~sglang_ddtree.verify_info.DDTreeVerifyInput` when the flag is given;
every other forward, and every DDTREE verify without the flag, goes to sglang's decision.
"""

from __future__ import annotations

from ..server_args import eager_verify

TARGETS = (
    "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner.can_run_graph",
    "sglang.srt.model_executor.runner.prefill_cuda_graph_runner.PrefillCudaGraphRunner.can_run_graph",
)


def no_graph_for_eager_tree_verify(original, self, forward_batch, *args, **kwargs):
    from ..verify_info import DDTreeVerifyInput  # the scheduler's own import; kept out of the launcher

    if isinstance(getattr(forward_batch, "spec_info", None), DDTreeVerifyInput) and eager_verify():
        return False
    return original(self, forward_batch, *args, **kwargs)


def register_graph_guard_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for target in TARGETS:
        HookRegistry.register(target, no_graph_for_eager_tree_verify, HookType.AROUND)
