"""Why the tiny Qwen3.5 hybrid target does not run end to end on CPU yet, precisely.

sglang's CPU path for ``qwen3_5`` calls fused CPU kernels from ``sgl_kernel`` that the stand-in
does not implement yet. This test lists them by scanning the modules that path imports and
asserts the list is exactly ``BLOCKING_OPS``: when an op gets a plain-torch version (and its own
unit test), remove it here; when the list is empty, replace this test by the hybrid e2e tests.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

import sgl_kernel

from sglang_ddtree.compat import releases

# Modules on the qwen3_5 CPU path (model, GDN backend, conv, GDN kernels dispatch).
MODULES = [
    "sglang.srt.models.qwen3_5",
    "sglang.srt.layers.attention.linear.gdn_backend",
    "sglang.srt.layers.attention.mamba.causal_conv1d",
    "sglang.srt.layers.attention.linear.kernels.gdn_triton",
]

# Per sglang release (hard-coded): 0.5.23's causal_conv1d module no longer names
# sgl_kernel's causal_conv1d_update.
_BLOCKING_OPS_0_5_17 = {
    "causal_conv1d_fn_cpu",
    "causal_conv1d_update",
    "chunk_gated_delta_rule_cpu",
    "fused_gdn_gating_cpu",
    "fused_input_proj_cpu",
    "fused_qk_gemma_rmsnorm_cpu",
    "fused_qk_gemma_rmsnorm_with_gate_cpu",
    "fused_qkvzba_split_reshape_cat_contiguous_cpu",
    "fused_sigmoid_gating_delta_rule_update_cpu",
    "fused_sigmoid_mul_cpu",
}
BLOCKING_OPS = {"0.5.17": _BLOCKING_OPS_0_5_17,
                "0.5.23": _BLOCKING_OPS_0_5_17 - {"causal_conv1d_update"}}[releases.RELEASE]


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    return Path(spec.origin).read_text()


def _implemented(name: str) -> bool:
    if hasattr(torch.ops.sgl_kernel, name):
        return True
    for mod in (sgl_kernel, importlib.import_module("sgl_kernel.mamba")):
        obj = getattr(mod, name)
        if not isinstance(obj, sgl_kernel._Missing):
            return True
    return False


def test_exactly_these_ops_block_the_hybrid_target_on_cpu():
    needed = set()
    for m in MODULES:
        src = _source(m)
        needed |= set(re.findall(r"torch\.ops\.sgl_kernel\.(\w+_cpu|causal_conv1d_update)\b", src))
        needed |= set(re.findall(r"from sgl_kernel(?:\.mamba)? import (\w+_cpu)\b", src))
        needed |= set(re.findall(r"from sgl_kernel import (causal_conv1d_update)\b", src))
    missing = {n for n in needed if not _implemented(n)}
    assert missing == BLOCKING_OPS


def test_importing_the_hybrid_model_on_cpu_fails_on_the_first_blocker():
    with pytest.raises(AttributeError, match="fused_sigmoid_mul_cpu"):
        importlib.import_module("sglang.srt.models.qwen3_5")
