"""DDTREE's one hook on ``ModelRunner.init_cuda_graphs``.

Two adjustments need that call (sglang has no seam for either): skipping the target's verify
graphs while the tree verify is eager (compat/wy_pool.py) and capping sglang's own verify runner
to the batch sizes budget auto can pick its width at (compat/verify_widths.py). They are composed
here into a single AROUND hook: sglang warns on every target with several AROUND hooks ("If any
AROUND hook skips calling original_fn, inner hooks will be bypassed"), which read as a fault in
every DDTREE server log (session 16).
"""

from __future__ import annotations

import functools

TARGET = "sglang.srt.model_executor.model_runner.ModelRunner.init_cuda_graphs"


def init_cuda_graphs(original, self, *args, **kwargs):
    from .verify_widths import init_cuda_graphs_with_width_caps
    from .wy_pool import init_cuda_graphs_eager_skip

    inner = functools.partial(init_cuda_graphs_with_width_caps, original)
    return init_cuda_graphs_eager_skip(inner, self, *args, **kwargs)


def register_graph_init_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, init_cuda_graphs, HookType.AROUND)
