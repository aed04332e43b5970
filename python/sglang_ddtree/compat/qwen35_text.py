"""DFLASH-family aux-hidden capture for the text-only Qwen3.5 wrapper (sglang 0.5.17).

DFLASH (and so DDTREE) conditions the drafter on target hidden states of chosen layers. sglang
asks the target for them through ``set_dflash_layers_to_capture`` in
``model_runner_components/attention_backend_setup.py::configure_aux_hidden_state_capture``.
The Qwen3.5 backbone (``models/qwen3_5.py``) implements the capture, and the multimodal wrapper
forwards to it, but the text-only wrapper ``models/qwen3_5_text.py::Qwen3_5ForCausalLM`` (the
form ``model_type qwen3_5_text`` checkpoints load as, e.g. our tiny hybrid target) does not, so
DFLASH refuses it with "implements neither ...". The wrapper already unpacks the backbone's
``(hidden, aux)`` tuple in ``forward``; only the switch is missing.

The hook is a BEFORE hook on ``configure_aux_hidden_state_capture``: for that wrapper class
only, it turns the backbone's capture on with the same layer offset the other wrappers use
(the backbone records the input of layer ``i + 1``, i.e. the output of layer ``i``) and tells
upstream there is nothing left to configure. Every other model goes to upstream unchanged.
"""

from __future__ import annotations

_TARGET = (
    "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
    "configure_aux_hidden_state_capture"
)


def enable_text_wrapper_capture(model, layer_ids) -> None:
    """Turn on the backbone capture of ``layer_ids`` (target layer indices) for the wrapper."""
    if layer_ids is None:
        raise ValueError("DFLASH requires explicit layer ids (dflash_config.target_layer_ids) for aux hidden capture.")
    if not model.pp_group.is_last_rank:
        return
    model.capture_aux_hidden_states = True
    model.model.set_dflash_layers_to_capture([int(i) + 1 for i in layer_ids])


_WRAPPER = ("sglang.srt.models.qwen3_5_text", "Qwen3_5ForCausalLM")


def is_text_wrapper(model) -> bool:
    """True for the text-only wrapper and its subclasses (the MoE wrapper). Matched by name so
    the hook never imports the model module (it does not import on every platform)."""
    return any((c.__module__, c.__name__) == _WRAPPER for c in type(model).__mro__)


def _capture_for_text_wrapper(*args, **kwargs):
    model = kwargs.get("model")
    if (
        kwargs.get("dflash_use_aux_hidden_state")
        and is_text_wrapper(model)
        and not hasattr(model, "set_dflash_layers_to_capture")
        and not hasattr(model, "set_dspark_layers_to_capture")
    ):
        enable_text_wrapper_capture(model, kwargs.get("dflash_target_layer_ids"))
        kwargs = dict(kwargs, dflash_use_aux_hidden_state=False)
        return args, kwargs
    return None


def register_qwen35_text_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _capture_for_text_wrapper, HookType.BEFORE)
