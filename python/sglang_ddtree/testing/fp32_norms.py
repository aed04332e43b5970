"""Test-only: GemmaRMSNorm serves float32 inputs on CUDA through sglang's own native path.

sglang 0.5.17's ``GemmaRMSNorm.forward_cuda`` calls ``sgl_kernel``'s ``gemma_rmsnorm`` /
``gemma_fused_add_rmsnorm``, which have bf16 / fp16 kernels only, so a float32 Qwen3.5 or
Qwen3-Next model cannot start on CUDA (with or without speculation). With
``SGLANG_DDTREE_TEST_FP32_NORMS`` set, the test plugin wraps ``forward_cuda``: a float32 ``x``
goes to ``forward_native`` (the same formula in torch, float32 throughout); any other dtype runs
the original kernel. Used by the GPU soak and divergence checks of the tiny hybrid in float32.
"""

from __future__ import annotations

import torch

TARGET = "sglang.srt.layers.layernorm.GemmaRMSNorm.forward_cuda"


def forward_cuda(original, self, x, residual=None, post_residual_addition=None):
    """AROUND hook for :data:`TARGET`: ``forward_native`` where ``x`` is float32, else ``original``."""
    if x.dtype == torch.float32:
        return self.forward_native(x, residual, post_residual_addition)
    return original(self, x, residual, post_residual_addition)
