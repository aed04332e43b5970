"""Hooks that let DFLASH-family speculative decoding run on sglang's CPU engine.

sglang 0.5.17 has no seam for either of these, so each is a narrow ``HookRegistry`` hook that
only changes behaviour when ``server_args.device == "cpu"`` (or in the CPU attention backend):

1. ``_handle_dflash`` rejects any device but CUDA/NPU before looking at anything else. The
   DFLASH worker itself is device-agnostic torch code plus attention through the configured
   backend, and the CPU ``intel_amx`` backend implements TARGET_VERIFY. The hook runs the
   upstream validation unchanged with the device check satisfied, then resolves the draft
   attention backend to the CPU one (upstream would pick flashinfer). On sglang 0.5.17 it
   presents ``device="cuda"`` for the call and restores ``cpu``; on 0.5.23, whose record cannot
   be written during resolution, ``current_platform`` is answered for the call by
   :class:`_CpuDflashPlatform` (0.5.23's out-of-tree platform questions: DFLASH supported, its
   draft attention backend ``intel_amx``), which also makes 0.5.23 declare that backend.

2. The draft worker's attention backend (0.5.17:
   ``draft_worker_common._resolve_draft_attention_backend_fallback``; 0.5.23:
   ``resolve_draft_worker_attention_backend``) replaces any draft backend outside its GPU list
   with flashinfer. On CPU the hook keeps the CPU backend.

3. The DFLASH worker and the overlap future map call
   ``tensor.record_stream(torch.cpu.current_stream())``, which torch rejects for CPU streams
   (``unknown parameter type``). A CPU tensor has no stream to record, so on the CPU engine
   ``record_stream`` becomes a no-op for CPU tensors only.

4. ``IntelAMXAttnBackend._build_extend_metadata`` reads ``spec_info.tree_topk``, which the
   DFLASH verify/draft inputs do not have (they carry ``topk = 1``: a chain). The hook gives
   such an input ``tree_topk = topk`` before the upstream code reads it.

5. ``IntelAMXAttnBackend.forward_extend`` ignores ``layer.attn_type``, so DFlash's
   non-causal (ENCODER_ONLY) draft layer would run causally inside the block on CPU. The hook
   passes an all-visible mask for such layers in TARGET_VERIFY forwards.

6. ``arg_groups/overrides.py::_attention_backend_platform_fallbacks`` swaps ``intel_amx`` for
   ``torch_native`` unless the CPU has AMX tiles AND sgl_kernel has packed-weight GEMMs, but
   ``torch_native`` cannot run TARGET_VERIFY. The intel_amx *attention* backend needs only the
   ``extend_attention_cpu`` / ``decode_attention_cpu`` ops; when those exist the hook skips
   that one fallback (layers keep their own AMX decision and use their torch paths).

7. ``IntelAMXAttnBackend.forward_extend`` computes the verify sequence lengths (prefix + draft
   tokens) in ``_build_extend_metadata`` and then overwrites them with
   ``forward_batch.seq_lens`` (prefix only) before calling the kernel, so every TARGET_VERIFY
   forward on CPU attends over the wrong window. Fixed upstream after 0.5.17. The hook hands
   the kernel the lengths the metadata computed, for TARGET_VERIFY only.

8. ``IntelAMXAttnBackend.forward_decode`` has the same overwrite for multi-step EAGLE-style
   draft decoding: it reads the expanded per-branch lengths from ``draft_decode_metadata``
   and then passes ``forward_batch.seq_lens`` (one per request, not per branch). The hook
   hands the kernel the per-branch lengths when draft-decode metadata is set.

9. The xgrammar backend allocates every grammar bitmask with ``pin_memory=True``, which torch
   refuses without a CUDA driver, and applies a bitmask to logits on GPU devices only, so
   structured output fails on the CPU engine with or without speculation. On CPU logits the
   hooks allocate the same bitmask unpinned and apply it with xgrammar's own CPU kernel (a token
   whose bit is clear gets -inf).
"""

from __future__ import annotations

import logging

from . import releases

logger = logging.getLogger(__name__)

_HANDLE_DFLASH = "sglang.srt.arg_groups.speculative_hook._handle_dflash"
_AMX_BACKEND = "sglang.srt.layers.attention.intel_amx_backend.IntelAMXAttnBackend"
_DRAFT_BACKEND = "sglang.srt.speculative.draft_worker_common." + releases.CURRENT.draft_backend_resolver
_AMX_PLATFORM_FALLBACK = (
    "sglang.srt.arg_groups.overrides._attention_backend_platform_fallbacks"
)
_XGRAMMAR_BITMASK = "sglang.srt.constrained.xgrammar_backend._allocate_token_bitmask"
_XGRAMMAR_APPLY = "sglang.srt.constrained.xgrammar_backend.XGrammarGrammar.apply_vocab_mask"
CPU_ATTENTION_BACKEND = "intel_amx"


def _handle_dflash_on_cpu(original, server_args, *args, **kwargs):
    if server_args.device != "cpu":
        return original(server_args, *args, **kwargs)
    user_draft_backend = server_args.speculative_draft_attention_backend
    server_args.device = "cuda"
    try:
        result = original(server_args, *args, **kwargs)
    finally:
        server_args.device = "cpu"
    server_args.speculative_draft_attention_backend = (
        user_draft_backend or server_args.attention_backend or CPU_ATTENTION_BACKEND
    )
    return result


def _keep_cpu_draft_backend(original, *args, draft_server_args, **kwargs):
    if draft_server_args.device == "cpu":
        return draft_server_args.speculative_draft_attention_backend or CPU_ATTENTION_BACKEND
    return original(*args, draft_server_args=draft_server_args, **kwargs)


class _CpuDflashPlatform:
    """sglang 0.5.23's ``current_platform`` as ``_handle_dflash`` sees it on CPU: an out-of-tree
    platform that supports DFLASH with the ``intel_amx`` draft attention backend; every other
    attribute is the real platform's."""

    def __init__(self, real):
        self._real = real

    def is_out_of_tree(self) -> bool:
        return True

    def supports_speculative_algorithm(self, algorithm: str) -> bool:
        return algorithm == "DFLASH"

    def supports_speculative_draft_attention_backend(self, algorithm: str, backend: str) -> bool:
        return backend == CPU_ATTENTION_BACKEND

    def get_default_speculative_draft_attention_backend(self, algorithm: str) -> str:
        return CPU_ATTENTION_BACKEND

    def __getattr__(self, name):
        return getattr(self._real, name)


def _handle_dflash_on_cpu_platform(original, server_args, *args, **kwargs):
    from sglang.srt.arg_groups import speculative_hook
    from sglang.srt.arg_groups.model_override_base import resolving_view

    if resolving_view(server_args).device != "cpu":
        return original(server_args, *args, **kwargs)
    real = speculative_hook.current_platform
    speculative_hook.current_platform = _CpuDflashPlatform(real)
    try:
        return original(server_args, *args, **kwargs)
    finally:
        speculative_hook.current_platform = real


def _keep_published_cpu_draft_backend(original, *args, **kwargs):
    from sglang.srt.runtime_context import get_context, get_spec

    if getattr(get_context().server_args, "device", None) == "cpu":
        return get_spec().speculative_draft_attention_backend or CPU_ATTENTION_BACKEND
    return original(*args, **kwargs)


def _keep_amx_attention_when_ops_exist(original, view, *args, **kwargs):
    import torch

    ops = torch.ops.sgl_kernel
    if (
        view.device == "cpu"
        and view.attention_backend == CPU_ATTENTION_BACKEND
        and hasattr(ops, "extend_attention_cpu")
        and hasattr(ops, "decode_attention_cpu")
    ):
        return {}
    return original(view, *args, **kwargs)


def _amx_metadata_chain_topk(original, self, forward_batch, *args, **kwargs):
    spec_info = forward_batch.spec_info
    if (
        forward_batch.forward_mode.is_target_verify()
        and spec_info is not None
        and not hasattr(spec_info, "tree_topk")
    ):
        spec_info.tree_topk = int(getattr(spec_info, "topk", 1))
    return original(self, forward_batch, *args, **kwargs)


def _amx_forward_extend_verify(original, self, q, k, v, layer, forward_batch, *args, **kwargs):
    if not forward_batch.forward_mode.is_target_verify() or self.extend_metadata is None:
        return original(self, q, k, v, layer, forward_batch, *args, **kwargs)
    from sglang.srt.layers.radix_attention import AttentionType

    import torch

    metadata = self.extend_metadata
    verify_seq_lens, extend_lens, extend_starts, tree_mask = metadata
    if layer.attn_type == AttentionType.ENCODER_ONLY:
        n_mask = int((extend_lens.long() * extend_lens.long()).sum())  # QLEN_ONLY layout
        tree_mask = torch.ones(n_mask, dtype=torch.bool, device=q.device)
    committed = forward_batch.seq_lens
    forward_batch.seq_lens = verify_seq_lens
    self.extend_metadata = (verify_seq_lens, extend_lens, extend_starts, tree_mask)
    try:
        return original(self, q, k, v, layer, forward_batch, *args, **kwargs)
    finally:
        forward_batch.seq_lens = committed
        self.extend_metadata = metadata


def _make_record_stream_cpu_safe() -> None:
    import torch

    original = torch.Tensor.record_stream
    if getattr(original, "_sglang_ddtree_cpu_safe", False):
        return

    def record_stream(self, stream):
        if self.device.type == "cpu":
            return None
        return original(self, stream)

    record_stream._sglang_ddtree_cpu_safe = True
    torch.Tensor.record_stream = record_stream


def _amx_forward_decode_draft_lens(original, self, q, k, v, layer, forward_batch, *args, **kwargs):
    if self.draft_decode_metadata is None:
        return original(self, q, k, v, layer, forward_batch, *args, **kwargs)
    committed = forward_batch.seq_lens
    forward_batch.seq_lens = self.draft_decode_metadata[1]
    try:
        return original(self, q, k, v, layer, forward_batch, *args, **kwargs)
    finally:
        forward_batch.seq_lens = committed


def _unpinned_bitmask(original, vocab_size: int, batch_size: int):
    import torch
    from sglang.srt.constrained import xgrammar_backend as xg

    if torch.cuda.is_available():
        return original(vocab_size, batch_size)
    return torch.full(xg.get_bitmask_shape(batch_size, vocab_size), -1, dtype=xg.bitmask_dtype)


def _apply_bitmask_on_cpu(original, self, logits, vocab_mask):
    if logits.device.type != "cpu":
        return original(self, logits, vocab_mask)
    import xgrammar

    xgrammar.apply_token_bitmask_inplace(logits, vocab_mask.to(logits.device), backend="cpu")


def register_cpu_hooks() -> None:
    """Register the hooks; called from the plugin only when sglang's CPU engine is selected."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    _make_record_stream_cpu_safe()

    if releases.CURRENT.dflash_platform_protocol:
        HookRegistry.register(_HANDLE_DFLASH, _handle_dflash_on_cpu_platform, HookType.AROUND)
        HookRegistry.register(_DRAFT_BACKEND, _keep_published_cpu_draft_backend, HookType.AROUND)
    else:
        HookRegistry.register(_HANDLE_DFLASH, _handle_dflash_on_cpu, HookType.AROUND)
        HookRegistry.register(_DRAFT_BACKEND, _keep_cpu_draft_backend, HookType.AROUND)
    HookRegistry.register(
        _AMX_PLATFORM_FALLBACK, _keep_amx_attention_when_ops_exist, HookType.AROUND
    )
    HookRegistry.register(
        _AMX_BACKEND + "._build_extend_metadata", _amx_metadata_chain_topk, HookType.AROUND
    )
    HookRegistry.register(
        _AMX_BACKEND + ".forward_extend", _amx_forward_extend_verify, HookType.AROUND
    )
    HookRegistry.register(
        _AMX_BACKEND + ".forward_decode", _amx_forward_decode_draft_lens, HookType.AROUND
    )
    HookRegistry.register(_XGRAMMAR_BITMASK, _unpinned_bitmask, HookType.AROUND)
    HookRegistry.register(_XGRAMMAR_APPLY, _apply_bitmask_on_cpu, HookType.AROUND)
