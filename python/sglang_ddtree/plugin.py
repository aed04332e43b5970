"""Entry point for sglang's general-plugin loader (group ``sglang.srt.plugins``).

sglang calls :func:`register` in the launcher process and again first thing in every
spawned scheduler process (``run_scheduler_process``), so everything registered here
reaches the workers without relying on fork-inherited state.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

# Environment variable naming a file that register() appends "<pid> <ppid>" to. It
# exists so tests can prove the plugin ran inside each spawned process; unset in
# production, where register() writes nothing.
MARKER_ENV = "SGLANG_DDTREE_PLUGIN_MARKER"

_registered = False


def _write_marker() -> None:
    path = os.environ.get(MARKER_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {os.getppid()}\n")


def register() -> None:
    """Register sglang-ddtree with sglang. Idempotent within one process."""
    global _registered
    if _registered:
        return
    _registered = True
    _write_marker()

    from sglang_ddtree.compat.dflash import register_dflash_hooks
    from sglang_ddtree.compat.gdn_wy import register_gdn_wy_hooks
    from sglang_ddtree.compat.hybrid_tree import register_hybrid_tree_hooks
    from sglang_ddtree.compat.request_checks import register_request_check_hooks
    from sglang_ddtree.compat.verify_graph import register_verify_graph_hooks
    from sglang_ddtree.compat.graph_init import register_graph_init_hook
    from sglang_ddtree.compat.wy_pool import register_wy_pool_hooks
    from sglang_ddtree.compat.qwen35_text import register_qwen35_text_hooks
    from sglang_ddtree.compat.trimmed_bundle import register_trimmed_bundle_hooks
    from sglang_ddtree.metrics import register_metrics_hooks
    from sglang_ddtree.compat.spec_finish import register_spec_finish_hook
    from sglang_ddtree.registration import register_ddtree, register_graph_guards, register_server_args

    register_server_args()
    register_ddtree()
    register_graph_guards()
    register_dflash_hooks()
    register_qwen35_text_hooks()
    register_hybrid_tree_hooks()
    register_gdn_wy_hooks()
    register_wy_pool_hooks()
    register_request_check_hooks()
    register_verify_graph_hooks()
    register_graph_init_hook()
    register_trimmed_bundle_hooks()
    register_metrics_hooks()
    register_spec_finish_hook()
    if os.environ.get("SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS"):  # test-only (GPU tracking cases)
        from sglang_ddtree.testing.extra_buffer_arch import apply_extra_buffer_archs

        logger.warning("sglang-ddtree TEST: mamba extra_buffer allowed for %s", apply_extra_buffer_archs())
    if os.environ.get("SGLANG_USE_CPU_ENGINE", "0") == "1":
        from sglang_ddtree.compat.cpu import register_cpu_hooks

        register_cpu_hooks()
    logger.info("sglang-ddtree plugin registered in pid %d", os.getpid())
