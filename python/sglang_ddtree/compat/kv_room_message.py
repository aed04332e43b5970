"""The launch error when a DDTREE server's memory leaves sglang's KV planner no room.

DDTREE's verify graphs keep memory beside sglang's static pools, and an automatic
``--mem-fraction-static`` is lowered by it (``engine/verify_memory.py``). Where what remains
cannot hold the weights (target and drafter), the per-request linear-attention states and any
KV cache, sglang's planner (``KVCacheConfigurator._profile_available_bytes``) raises a ValueError
that only asks to raise ``--mem-fraction-static`` above a minimum, which can lie below the
fraction in force (seen on an H100 at Qwen3.6-27B shapes, 64 requests: "raise above 0.684"
under 0.775). One AROUND hook re-raises that error on a DDTREE server with the verify graphs'
share and what to lower, sglang's text kept after it; any other error, and every other
server's, passes unchanged.
"""

from __future__ import annotations

from ..server_args import is_ddtree, published_drafter_block_size, published_server_args

TARGET = "sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._profile_available_bytes"
SGLANG_TEXT = "leave no GPU memory for the KV cache"


def message(fraction: float, need_mb: float, requests: int, widths, cause: str) -> str:
    """The error text: the fraction in force, the verify graphs' need (MiB) for ``requests`` x
    ``widths``, and sglang's own ``cause``."""
    return (
        f"DDTREE: no GPU memory is left for the KV cache under --mem-fraction-static {fraction:.3f}. DDTREE's "
        f"verify graphs keep ~{need_mb / 1024:.1f} GiB beside sglang's static pools for {requests} requests x "
        f"verify widths {list(widths)} (an automatic --mem-fraction-static is lowered by that much), and the "
        f"weights (target and drafter) and the per-request linear-attention states take the rest. Lower the "
        f"requests a verify runs for (--max-running-requests, --cuda-graph-max-bs-decode), "
        f"--speculative-ddtree-budget (or the largest budget of the step-cost table), or --context-length; or "
        f"serve on a GPU with more memory. (sglang: {cause})"
    )


def _profile_available_bytes(original, self, *args, **kwargs):
    try:
        return original(self, *args, **kwargs)
    except ValueError as e:
        server_args = published_server_args()
        if SGLANG_TEXT not in str(e) or not is_ddtree(server_args):
            raise
        from ..engine.verify_memory import server_need

        try:
            need, requests, widths = server_need(server_args, published_drafter_block_size())
        except Exception:  # the need cannot be computed here: sglang's own error, as it was
            raise e from None
        raise ValueError(message(float(server_args.mem_fraction_static), need, requests, widths, str(e))) from e


def register_kv_room_message_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, _profile_available_bytes, HookType.AROUND)
