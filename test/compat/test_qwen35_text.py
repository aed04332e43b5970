"""The plugin's aux-hidden capture switch for sglang's text-only Qwen3.5 wrapper (DFLASH/DDTREE
on ``model_type qwen3_5_text`` targets). The GPU smoke suite runs DFLASH on the tiny hybrid
through it; here the hook's contract is checked without building the model."""

from __future__ import annotations

import pytest

from sglang_ddtree.compat import qwen35_text, releases


class _Backbone:
    def __init__(self):
        self.captured = None

    def set_dflash_layers_to_capture(self, ids):
        self.captured = list(ids)


class _Pp:
    def __init__(self, last):
        self.is_last_rank = last


class _TextWrapper:
    """Stands in for sglang's ``qwen3_5_text.Qwen3_5ForCausalLM`` (that module needs the fused
    GDN kernels at import, so it cannot be imported on CPU; test/compat/test_cpu.py)."""

    def __init__(self, last_rank):
        self.capture_aux_hidden_states = False
        self.model = _Backbone()
        self.pp_group = _Pp(last_rank)


_TextWrapper.__module__ = "sglang.srt.models.qwen3_5_text"
_TextWrapper.__name__ = "Qwen3_5ForCausalLM"


class _MoeWrapper(_TextWrapper):
    pass


def _wrapper(last_rank=True, cls=_TextWrapper):
    return cls(last_rank)


def _call(model, use=True, ids=(1, 5)):
    return qwen35_text._capture_for_text_wrapper(
        model=model, eagle_use_aux_hidden_state=False, eagle_aux_hidden_state_layer_ids=None,
        dflash_use_aux_hidden_state=use, dflash_target_layer_ids=list(ids) if ids is not None else None,
        is_dspark=False,
    )


def test_upstream_wrapper_lacks_the_method_on_0_5_17_only():
    # Read from source (the module does not import on CPU). sglang 0.5.23 added the method: the
    # hook steps aside there (hasattr check); on 0.5.17 it is what gives the wrapper the method.
    import importlib.util
    from pathlib import Path

    src = Path(importlib.util.find_spec("sglang.srt.models").submodule_search_locations[0]) / "qwen3_5_text.py"
    text = src.read_text()
    assert "class Qwen3_5ForCausalLM(" in text
    assert ("set_dflash_layers_to_capture" in text) == {"0.5.17": False, "0.5.23": True}[releases.RELEASE]


def test_subclass_of_the_wrapper_is_matched():
    m = _wrapper(cls=_MoeWrapper)
    _call(m)
    assert m.model.captured == [2, 6]


def test_hook_turns_capture_on_with_layer_offset_and_skips_upstream():
    m = _wrapper()
    args, kwargs = _call(m)
    assert m.capture_aux_hidden_states is True
    assert m.model.captured == [2, 6]
    assert kwargs["dflash_use_aux_hidden_state"] is False  # upstream would raise otherwise
    assert kwargs["model"] is m


def test_hook_leaves_other_models_and_non_dflash_runs_alone():
    assert _call(object()) is None
    m = _wrapper()
    assert _call(m, use=False) is None
    assert m.capture_aux_hidden_states is False and m.model.captured is None


def test_hook_needs_layer_ids_and_respects_pipeline_rank():
    with pytest.raises(ValueError, match="target_layer_ids"):
        _call(_wrapper(), ids=None)
    m = _wrapper(last_rank=False)
    _call(m)
    assert m.capture_aux_hidden_states is False and m.model.captured is None


def test_plugin_registers_the_hook():
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from sglang_ddtree import plugin

    plugin.register()
    hooks = HookRegistry._hooks.get(qwen35_text._TARGET, [])
    assert any(h is qwen35_text._capture_for_text_wrapper and t == HookType.BEFORE for t, h, _ in hooks)
