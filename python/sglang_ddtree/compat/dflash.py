"""Hooks for DFLASH-family drafting in sglang 0.5.17 that are not device specific.

``ModelRunner`` passes ``forward_batch.input_embeds.bfloat16()`` to the model whatever the
model dtype is (``model_runner.py``, the input-embeds override path). DFlash drafts always go
through that path (the block's noise embedding comes from the target embedding), so a
float32 or float16 drafter fails in its first linear layer with a dtype mismatch. The hook
casts the embeddings back to the drafter's own parameter dtype on entry to
``DFlashDraftModel.forward``; for bf16 models (the production case) it does nothing.
"""

from __future__ import annotations

_DFLASH_FORWARD = "sglang.srt.models.dflash.DFlashDraftModel.forward"


def _forward_in_model_dtype(original, self, input_ids, positions, forward_batch, input_embeds=None, *args, **kwargs):
    if input_embeds is not None:
        dtype = self.fc.weight.dtype
        if input_embeds.dtype != dtype:
            input_embeds = input_embeds.to(dtype)
    return original(self, input_ids, positions, forward_batch, input_embeds, *args, **kwargs)


def register_dflash_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_DFLASH_FORWARD, _forward_in_model_dtype, HookType.AROUND)
