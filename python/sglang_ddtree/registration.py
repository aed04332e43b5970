"""``--speculative-algorithm DDTREE``: registration with sglang through the plugin.

DDTREE is a DFlash-family algorithm (same drafter, target hidden-state capture, draft KV pool),
so its spec class answers the DFlash predicates; sglang then sets everything up as for
DFLASH and instantiates :class:`~sglang_ddtree.worker.DDTreeWorker`.
"""

from __future__ import annotations

import functools
import logging

from sglang.srt.speculative.spec_registry import CustomSpecAlgo

from .server_args import ALGORITHM, ddtree_flags_set, is_ddtree, validate_ddtree_args, validate_ddtree_parallelism

logger = logging.getLogger(__name__)


class DDTreeSpecAlgo(CustomSpecAlgo):
    def is_dflash(self) -> bool:
        return True

    def is_dflash_family(self) -> bool:
        return True

    def supports_target_verify_for_draft(self) -> bool:
        return True

    def has_draft_kv(self) -> bool:
        return True

    # Called by the scheduler but missing on CustomSpecAlgo in sglang 0.5.17.
    def need_topk(self) -> bool:
        return False

    def carries_draft_hidden_states(self) -> bool:
        return False

    def create_future_map(self, device, req_to_token_pool, needs_cpu_seq_lens=True, needs_confidence_relay=False):
        from sglang.srt.managers.overlap_utils import FutureMap

        return FutureMap(device, self, req_to_token_pool, needs_cpu_seq_lens, needs_confidence_relay)

    def get_num_tokens_per_req_for_target_verify(self, num_draft_tokens: int, is_draft_worker: bool) -> int:
        # The target verifies the tree (num_draft_tokens = verify width); the drafter runs
        # one DFlash block, whose size comes from its own config.
        if is_draft_worker:
            return _drafter_block_size()
        return num_draft_tokens

    def handle_server_args(self, server_args) -> None:
        # Everything DFLASH needs (device, draft path, block size, draft attention backend),
        # through the module attribute so plugin hooks on it apply.
        from sglang.srt.arg_groups import speculative_hook

        from .worker import verify_width

        if server_args.speculative_draft_window_size is not None:
            raise ValueError(
                "--speculative-draft-window-size is not supported with --speculative-algorithm "
                "DDTREE yet; remove it."
            )
        validate_ddtree_parallelism(server_args)
        speculative_hook._handle_dflash(server_args)
        block_size = int(server_args.speculative_num_draft_tokens)
        validate_ddtree_args(server_args, block_size)
        # The verify width is what the scheduler reserves KV for each step.
        server_args.speculative_num_draft_tokens = verify_width(
            server_args.speculative_ddtree_budget, block_size
        )
        _reserve_verify_memory(server_args, block_size)


def _reserve_verify_memory(server_args, block_size: int) -> None:
    """Room beside the static pools for the verify graphs (compat/verify_memory.py). sglang resolved
    --mem-fraction-static before the speculative handling; whether the user gave it is recorded
    by the __post_init__ hook below (absent: treated as given, so never lowered)."""
    from sglang.srt.utils.common import get_device_memory_capacity

    from .compat.verify_memory import apply_verify_reserve, verify_footprint
    from .compat.verify_widths import largest_capture_bs
    from .worker import ddtree_verify_widths, ddtree_width_caps

    gpu_mem = get_device_memory_capacity(server_args.device)
    hybrid = is_hybrid_target(server_args)
    model_config = server_args.get_model_config()
    # The verify runs through the decode or the prefill attention backend depending on the
    # backend pairing; count the one whose graph buffers are larger (None: not resolved yet,
    # counted as triton's).
    backends = {server_args.decode_attention_backend or server_args.attention_backend,
                server_args.prefill_attention_backend or server_args.attention_backend}
    fp = max((verify_footprint(model_config.hf_config,
                               server_args.speculative_ddtree_gdn_mode if hybrid else None,
                               tp_size=server_args.tp_size,
                               dtype_bytes=4 if str(server_args.dtype) in ("float32", "float") else 2,
                               attention_backend=b,
                               context_len=server_args.context_length or getattr(model_config, "context_len", None),
                               kv_splits=int(getattr(server_args, "triton_attention_num_kv_splits", 8) or 8))
              for b in backends), key=lambda f: f.per_position)
    # Budget auto: a width's graphs go only up to the batch sizes the policy can choose it at.
    caps = ddtree_width_caps(server_args, block_size)
    bs_list = getattr(getattr(getattr(server_args, "cuda_graph_config", None), "decode", None), "bs", None)
    per_width = ({w: bs for w, bs in largest_capture_bs(bs_list, caps).items() if caps[w] is not None}
                 if bs_list else {})
    apply_verify_reserve(server_args, getattr(server_args, _FRACTION_GIVEN, True), gpu_mem,
                         ddtree_verify_widths(server_args, block_size, caps), fp, per_width)


@functools.lru_cache(maxsize=1)
def _drafter_block_size() -> int:
    from sglang.srt.runtime_context import get_spec
    from sglang.srt.utils.hf_transformers_utils import get_config

    from .worker import drafter_block_size

    return drafter_block_size(get_config(get_spec().speculative_draft_model_path, trust_remote_code=False))


_HYBRID_MODEL_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


def is_hybrid_target(server_args) -> bool:
    cfg = server_args.get_model_config().hf_config
    text = getattr(cfg, "text_config", None) or cfg
    layer_types = getattr(text, "layer_types", None) or []
    model_type = getattr(text, "model_type", None) or getattr(cfg, "model_type", None)
    return "linear_attention" in layer_types or model_type in _HYBRID_MODEL_TYPES


def register_ddtree() -> None:
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_registry import get_spec

    if get_spec(ALGORITHM) is not None:
        return

    @SpeculativeAlgorithm.register(ALGORITHM, supports_overlap=True, spec_class=DDTreeSpecAlgo)
    def _factory(server_args):
        from .worker import DDTreeWorker

        return DDTreeWorker


def register_server_args() -> None:
    """Swap in DDTreeServerArgs (see ``sglang_ddtree.server_args`` for why this needs hooks)."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from .server_args import DDTreeServerArgs

    HookRegistry.register("sglang.srt.server_args.ServerArgs", DDTreeServerArgs, HookType.REPLACE)
    HookRegistry.register(
        "sglang.srt.entrypoints.engine.Engine.server_args_class", DDTreeServerArgs, HookType.REPLACE
    )
    HookRegistry.register(
        "sglang.srt.server_args.ServerArgs.__post_init__", reject_ddtree_flags_without_ddtree, HookType.AROUND
    )


_GRAPH_RUNNERS = (
    "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner.can_run_graph",
    "sglang.srt.model_executor.runner.prefill_cuda_graph_runner.PrefillCudaGraphRunner.can_run_graph",
)


def _no_graph_for_tree_verify(original, self, forward_batch, *args, **kwargs):
    """sglang captures the DFlash-family verify graph with no tree mask; replaying it for a
    DDTREE verify would silently drop the mask, so tree verifies run eagerly until the
    tree-mask capture is implemented."""
    from .compat.verify_graph import tree_verify_graphs_enabled
    from .worker import DDTreeVerifyInput

    if isinstance(getattr(forward_batch, "spec_info", None), DDTreeVerifyInput) and not tree_verify_graphs_enabled():
        return False
    return original(self, forward_batch, *args, **kwargs)


def register_graph_guards() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for target in _GRAPH_RUNNERS:
        HookRegistry.register(target, _no_graph_for_tree_verify, HookType.AROUND)


# Set on a ServerArgs before sglang resolves it: whether --mem-fraction-static was given (sglang
# fills it in, so afterwards an automatic value cannot be told from a given one).
_FRACTION_GIVEN = "_ddtree_mem_fraction_given"


def reject_ddtree_flags_without_ddtree(original, self, *args, **kwargs):
    """AROUND hook on ServerArgs.__post_init__: DDTREE flags need the DDTREE algorithm. Also
    records whether --mem-fraction-static was given, for ``_reserve_verify_memory`` inside the
    original, and removes the mark after it (``vars(server_args)`` is what /server_info shows)."""
    object.__setattr__(self, _FRACTION_GIVEN, self.mem_fraction_static is not None)
    try:
        result = original(self, *args, **kwargs)
    finally:
        self.__dict__.pop(_FRACTION_GIVEN, None)
    if not is_ddtree(self):
        flags = ddtree_flags_set(self)
        if flags:
            raise ValueError(
                f"{', '.join(flags)} require(s) --speculative-algorithm DDTREE "
                f"(got --speculative-algorithm {self.speculative_algorithm})."
            )
    return result
