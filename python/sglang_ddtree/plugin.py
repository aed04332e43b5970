"""Entry point for sglang's general-plugin loader (group ``sglang.srt.plugins``).

sglang calls :func:`register` in the launcher process and again first thing in every spawned
scheduler process (``run_scheduler_process``), so everything registered here reaches the workers
without relying on fork-inherited state. It registers the DDTREE algorithm and, through
``HookRegistry``, the flags and the narrow hooks of ``compat/`` (one module per gap in sglang);
the test plugin (``testing/plugin.py``) only when a test variable asks for it. Importing this
module under an sglang release other than ``compat.releases.SUPPORTED_RELEASES`` raises
``UnsupportedSglangRelease`` naming them.
"""

from __future__ import annotations

import importlib
import logging
import os

from . import config
from .compat import releases  # noqa: F401  (refuses an unsupported sglang release at import)

logger = logging.getLogger(__name__)

_registered = False


def register() -> None:
    """Register sglang-ddtree with sglang. Idempotent within one process."""
    global _registered
    if _registered:
        return
    _registered = True
    marker = config.PLUGIN_MARKER.get()
    if marker:  # tests: prove the plugin ran in each spawned process
        with open(marker, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {os.getppid()}\n")

    from .compat import (
        conv_windows,
        dflash,
        gdn_views,
        graph_guard,
        graph_init,
        input_checks,
        kv_room_message,
        linear_tree_mode,
        linear_verify,
        mamba_scratch,
        metrics_hooks,
        qwen35_text,
        request_checks,
        server_args_class,
        skinny_linear,
        spec_finish,
        tree_attention,
        trimmed_bundle,
        verify_graph_capture,
    )
    from .spec_algo import register_ddtree

    server_args_class.register_server_args_hooks()
    register_ddtree()
    graph_guard.register_graph_guard_hooks()
    dflash.register_dflash_hooks()
    qwen35_text.register_qwen35_text_hooks()
    linear_tree_mode.register_linear_tree_mode_hook()
    conv_windows.register_conv_window_hook()
    linear_verify.register_linear_verify_hook()
    mamba_scratch.register_mamba_scratch_hooks()
    kv_room_message.register_kv_room_message_hook()
    request_checks.register_request_check_hooks()
    input_checks.register_input_check_hooks()
    verify_graph_capture.register_verify_graph_capture_hook()
    graph_init.register_graph_init_hook()
    trimmed_bundle.register_trimmed_bundle_hooks()
    metrics_hooks.register_metrics_hooks()
    spec_finish.register_spec_finish_hook()
    tree_attention.register_tree_attention_hook()
    if os.environ.get("SGLANG_USE_CPU_ENGINE", "0") != "1":  # sglang's own variable
        gdn_views.register_gdn_views_hook()  # (sglang's Qwen3.5 module does not import on the CPU engine)
        skinny_linear.register_skinny_linear_hook()  # (inert where --speculative-ddtree-gemm-table finds no table)
    else:
        from .compat.cpu import register_cpu_hooks
        from .compat.cpu_paged import register_cpu_paged_hooks

        register_cpu_hooks()
        register_cpu_paged_hooks()
    if config.wants_test_plugin():
        importlib.import_module("sglang_ddtree.testing.plugin").register()
    logger.info("sglang-ddtree plugin registered in pid %d", os.getpid())
