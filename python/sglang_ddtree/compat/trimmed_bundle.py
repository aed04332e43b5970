"""EAGLE-family draft CUDA-graph capture on a host without the DeepSeek attention stacks.

sglang 0.5.17's ``EagleDraftWorker._capture_cuda_graphs`` (``speculative/eagle_worker_v2.py``)
imports three attention backends only to build an ``isinstance`` list of graph-capable backends:
``dsa_backend`` (module-level ``import deep_gemm``), ``deepseek_v4_backend`` and
``flashmla_backend`` (``sgl_kernel.flash_mla``). A host without those libraries (our offline
bundle drops them: triton attention never loads them) cannot capture any EAGLE/STANDALONE draft
graph, whatever attention backend it actually uses.

The hook runs the capture with those three modules importable: each one that really fails to
import is replaced, for the duration of the call only, by a module whose backend class nothing
is an instance of (so the ``isinstance`` check is exactly what it would be: the triton backend
is none of them) and whose every other attribute raises ImportError naming the missing
library. A module that imports normally is used as is; the placeholders are removed afterwards.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types

_TARGET = "sglang.srt.speculative.eagle_worker_v2.EagleDraftWorker._capture_cuda_graphs"

# module -> the class names _capture_cuda_graphs reads from it
ISINSTANCE_ONLY = {
    "sglang.srt.layers.attention.dsa_backend": ("DeepseekSparseAttnBackend",),
    "sglang.srt.layers.attention.deepseek_v4_backend": ("DeepseekV4AttnBackend",),
    "sglang.srt.layers.attention.flashmla_backend": ("FlashMLABackend",),
}


def unavailable_module(name: str, classes, reason: str) -> types.ModuleType:
    """A module exposing ``classes`` as empty classes (no instances exist) and nothing else."""
    mod = types.ModuleType(name, f"placeholder: {name} cannot be imported here ({reason})")
    for cls in classes:
        setattr(mod, cls, type(cls, (), {"__module__": name, "__doc__": f"unavailable: {reason}"}))

    def __getattr__(attr):
        if attr.startswith("__"):  # import machinery probes (__path__, __spec__, ...)
            raise AttributeError(attr)
        raise ImportError(f"{name}.{attr} is unavailable on this host: {reason}")

    mod.__getattr__ = __getattr__
    return mod


@contextlib.contextmanager
def placeholders_for_missing_backends():
    added = []
    for name, classes in ISINSTANCE_ONLY.items():
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError as e:  # ModuleNotFoundError included
            sys.modules[name] = unavailable_module(name, classes, repr(e))
            added.append(name)
    try:
        yield added
    finally:
        for name in added:
            if getattr(sys.modules.get(name), "__doc__", "").startswith("placeholder:"):
                del sys.modules[name]


def _capture_with_placeholders(original, *args, **kwargs):
    with placeholders_for_missing_backends():
        return original(*args, **kwargs)


def register_trimmed_bundle_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _capture_with_placeholders, HookType.AROUND)
