"""No per-node state scratch in ``--speculative-ddtree-gdn-mode wy``, and no target verify graph
that DDTREE never replays.

sglang 0.5.17 sizes and allocates, for every hybrid speculative server, one recurrent state and
one conv window *per verify position* per request (``MambaPool``'s ``intermediate_ssm`` /
``intermediate_conv_window``, and the matching reservation in
``KVCacheConfigurator._handle_max_mamba_cache``): at Qwen3.6-27B shapes ~144 MiB x (budget + 1)
per request, which is why a budget-64 tree cannot run there at concurrency 16. In wy mode the
tree kernels (compat/gdn_wy.py) read the committed state and keep only ``u``, ``G`` and the
pre-conv inputs until the commit, so that scratch is dead weight. sglang has no per-algorithm
switch for it; two narrow hooks size it for one position instead (the pool still builds its
speculative state object, which its other code expects):

- ``MambaPool.__init__``: ``speculative_num_draft_tokens=1``;
- ``KVCacheConfigurator._handle_max_mamba_cache``: the same value while it reserves memory.

The one-position scratch is only safe because nothing runs sglang's per-node GDN verify in wy
mode: the eager tree verify goes through our kernels, the target's verify CUDA graph is not
captured while the verify is eager (below), and with the graph verify (default) its capture runs our
kernels too (compat/verify_graph.py). The cross-check (``SGLANG_DDTREE_WY_CHECK``), which does
run sglang's verify, keeps the full scratch.

Target verify graphs: with ``SGLANG_DDTREE_VERIFY_CUDA_GRAPH=0`` DDTREE's tree verify runs
eagerly (``registration._no_graph_for_tree_verify``), so the target's decode/verify graphs sglang
captures for the DFlash family would never be replayed; their capture is then skipped (start-up
time and graph memory, both GDN modes; the drafter's graphs are captured as before).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

_POOL = "sglang.srt.mem_cache.memory_pool.MambaPool.__init__"
_PLANNER = "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._handle_max_mamba_cache"

# Verify positions the wy-mode pool keeps scratch for (sglang's code indexes the buffer, so it
# cannot be absent).
WY_SCRATCH_POSITIONS = 1


def wy_server() -> bool:
    """Whether this process serves DDTREE with ``--speculative-ddtree-gdn-mode wy``."""
    from ..server_args import is_ddtree, published_server_args

    sa = published_server_args()
    return is_ddtree(sa) and getattr(sa, "speculative_ddtree_gdn_mode", None) == "wy"


def _shrink() -> bool:
    from .gdn_wy import wy_check_enabled

    # The developer cross-check (compat/gdn_wy.py) runs sglang's per-node verify too.
    return wy_server() and not wy_check_enabled()


def _pool_init(original, self, *args, **kwargs):
    if _shrink() and kwargs.get("speculative_num_draft_tokens") is not None:
        logger.info("DDTREE wy: linear-attention verify scratch sized for %d position(s) instead of %d",
                    WY_SCRATCH_POSITIONS, kwargs["speculative_num_draft_tokens"])
        kwargs["speculative_num_draft_tokens"] = WY_SCRATCH_POSITIONS
    return original(self, *args, **kwargs)


def _planner(original, self, *args, **kwargs):
    from sglang.srt.runtime_context import get_spec

    if not _shrink() or get_spec().speculative_num_draft_tokens is None:
        return original(self, *args, **kwargs)
    # Scoped: only this sizing call sees the one-position scratch; the scheduler, the KV
    # reservation per step and the verify still use the full verify width.
    with get_spec().override(speculative_num_draft_tokens=WY_SCRATCH_POSITIONS):
        return original(self, *args, **kwargs)


def init_cuda_graphs_eager_skip(original, self, *args, **kwargs):
    """Part of compat/graph_init.py's hook on ``ModelRunner.init_cuda_graphs``."""
    from ..server_args import is_ddtree_server
    from .verify_graph import tree_verify_graphs_enabled

    if is_ddtree_server() and not self.is_draft_worker and not tree_verify_graphs_enabled():
        logger.info("DDTREE: eager tree verify; the target's verify CUDA graphs are not captured")
        kwargs["capture_decode_cuda_graph"] = False
        args = ()
    return original(self, *args, **kwargs)


def register_wy_pool_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_POOL, _pool_init, HookType.AROUND)
    HookRegistry.register(_PLANNER, _planner, HookType.AROUND)
