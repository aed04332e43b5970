"""Test-only stand-in for ``sgl_kernel`` so real sglang runs on a CPU without the CUDA wheel.

Never installed for users: tests put ``test/harness`` on ``PYTHONPATH``.

- Every name (and every ``sgl_kernel.<submodule>``) is importable, because sglang imports
  many kernels at module import time even on code paths the CPU never runs. A name we do not
  implement resolves to a callable that raises ``NotImplementedError`` naming it, so a CPU
  path that really needs a missing op fails loudly instead of computing garbage.
- The ops sglang's CPU engine calls are implemented in plain torch: the attention ops the
  ``intel_amx`` backend calls through ``torch.ops.sgl_kernel`` (registered in ``_ops``), and
  the speculative-decoding helpers imported by name (``speculative``).
- We deliberately do NOT register ``convert_weight_packed``: sglang takes that as "AMX packed
  weights available" and would route linear layers to packed GEMMs. Without it, layers run
  their ``forward_native`` torch paths and only attention goes through our ops.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

from . import _ops  # noqa: F401  (registers torch.ops.sgl_kernel.*)
from .speculative import (  # noqa: F401
    assign_draft_cache_locs_contiguous_cpu,
    assign_extend_cache_locs_cpu,
    assign_req_to_token_pool_cpu,
    build_draft_decode_metadata_cpu,
    build_tree_kernel_efficient,
    build_tree_kernel_efficient_cpu,
    copy_all_layer_kv_cache_cpu,
    fill_accept_out_cache_loc_cpu,
    fill_bonus_tokens_cpu,
    reconstruct_indices_from_tree_mask,
    rotate_input_ids_cpu,
    verify_tree_greedy,
    verify_tree_greedy_cpu,
)

__version__ = "0.0.0+cpu-standin"
IS_CPU_STANDIN = True


class _Missing:
    """Stand-in for an unimplemented kernel: importable, attribute-chainable, loud when called.

    Attribute access returns nested stand-ins because sglang reads constants off kernel
    modules at import time (e.g. ``scalar_types.uint4b8``) on paths the CPU never executes.
    """

    def __init__(self, qualname: str):
        self._qualname = qualname
        self.__name__ = qualname.rsplit(".", 1)[-1]
        self.__qualname__ = qualname

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(
            f"sgl_kernel stand-in: {self._qualname} is not implemented on CPU "
            "(test/harness/sgl_kernel). Add a plain-torch version and a unit test."
        )

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self._qualname}.{name}")

    def __repr__(self) -> str:
        return f"<sgl_kernel stand-in: missing {self._qualname}>"


def _missing(qualname: str) -> _Missing:
    return _Missing(qualname)


class _StubModule(types.ModuleType):
    """A submodule whose every attribute is a loud not-implemented stub."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fn = _missing(f"{self.__name__}.{name}")
        setattr(self, name, fn)
        return fn


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``import sgl_kernel.<anything>`` succeed with a stub module."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(__name__ + "."):
            return None
        # Real submodules in this directory are found by the normal finders first.
        for finder in sys.meta_path:
            if finder is self:
                continue
            try:
                spec = finder.find_spec(fullname, path, target)
            except Exception:
                spec = None
            if spec is not None:
                return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        return None


if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
    sys.meta_path.append(_StubFinder())


def __getattr__(name: str):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    fn = _missing(f"sgl_kernel.{name}")
    globals()[name] = fn
    return fn
