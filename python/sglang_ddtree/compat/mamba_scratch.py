"""No per-node linear-attention scratch for the tree verify in ``--speculative-ddtree-gdn-mode wy``.

sglang 0.5.17 sizes and allocates, for every hybrid speculative server, one recurrent state and
one conv window per verify position per request (``MambaPool``'s ``intermediate_ssm`` /
``intermediate_conv_window``, and the matching reservation in
``KVCacheConfigurator._handle_max_mamba_cache``): at Qwen3.6-27B shapes ~144 MiB x (budget + 1)
per request. In wy mode the tree kernels (``engine/tree_gdn.py``) keep no per-node state, so that
scratch is dead weight; sglang has no per-algorithm switch for it. Two narrow AROUND hooks size it
for ``engine.tree_gdn.scratch_positions`` positions instead (the pool still builds its
speculative state object, which its other code expects):

- ``MambaPool.__init__``: its ``speculative_num_draft_tokens`` argument;
- ``KVCacheConfigurator._handle_max_mamba_cache``: the spec config's value, for that call only
  (the scheduler's KV reservation per step and the verify keep the full verify width).

Safe because nothing runs sglang's per-node GDN verify in wy mode: eager and captured verifies
both go through the tree kernels (the developer cross-check, which runs sglang's, keeps the full
scratch).
"""

from __future__ import annotations

import logging

from ..engine.tree_gdn import scratch_positions
from ..server_args import published_server_args

logger = logging.getLogger(__name__)

POOL = "sglang.srt.mem_cache.memory_pool.MambaPool.__init__"
PLANNER = "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._handle_max_mamba_cache"


def _pool_init(original, self, *args, **kwargs):
    n = scratch_positions(published_server_args())
    if n is not None and kwargs.get("speculative_num_draft_tokens") is not None:
        logger.info("DDTREE wy: linear-attention verify scratch sized for %d position(s) instead of %d",
                    n, kwargs["speculative_num_draft_tokens"])
        kwargs["speculative_num_draft_tokens"] = n
    return original(self, *args, **kwargs)


def _planner(original, self, *args, **kwargs):
    from sglang.srt.runtime_context import get_spec

    n = scratch_positions(published_server_args())
    if n is None or get_spec().speculative_num_draft_tokens is None:
        return original(self, *args, **kwargs)
    with get_spec().override(speculative_num_draft_tokens=n):
        return original(self, *args, **kwargs)


def register_mamba_scratch_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(POOL, _pool_init, HookType.AROUND)
    HookRegistry.register(PLANNER, _planner, HookType.AROUND)
