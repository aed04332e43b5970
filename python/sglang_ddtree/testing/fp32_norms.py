"""Test-only: sglang's norms and rotary embedding serve float32 inputs on CUDA through their own
native paths.

sglang 0.5.17's CUDA forwards of ``RMSNorm`` and ``GemmaRMSNorm`` call ``sgl_kernel``'s
``rmsnorm`` / ``fused_add_rmsnorm`` / ``gemma_rmsnorm`` / ``gemma_fused_add_rmsnorm``, whose
kernels (flashinfer's, and sgl_kernel's own fallback) take bf16 / fp16 only, and
``RotaryEmbedding``'s calls a rope kernel of the same family: a float32 tiny model (the hybrid
target's GemmaRMSNorm, the DFlash drafter's RMSNorm and rope) cannot start on CUDA, with or
without speculation. With ``SGLANG_DDTREE_TEST_FP32_NORMS`` set, the test plugin wraps each
``forward_cuda`` of :data:`HOOKS`: a float32 input goes to the class's ``forward_native`` (the
same formula in torch, float32 throughout); any other dtype, and a rope call that asks for the
fused KV-cache write (``fused_set_kv_buffer_arg``, which the native path refuses), runs the
original kernel.

The hybrid's GatedDeltaNet prefill (``TritonGDNKernel.extend``, sglang's chunked kernel) refuses
float32 outright ("ChunkGatedDeltaRuleFunction does not support float32"). Under the same switch a
float32 prefill runs :func:`.gdn_prefill_fp32.chunk_gdn_prefill` instead (plain torch, float32
throughout, the same pool contract: each sequence's slot read as its initial state and overwritten
with its final state), so a float32 server computes in float32 from the prompt on, in both servers
of a check alike. Used by the GPU soak and divergence checks of the tiny hybrid in float32.
"""

from __future__ import annotations

import torch

NORMS = ("sglang.srt.layers.layernorm.RMSNorm.forward_cuda",
         "sglang.srt.layers.layernorm.GemmaRMSNorm.forward_cuda")
ROPE = "sglang.srt.layers.rotary_embedding.base.RotaryEmbedding.forward_cuda"


def forward_cuda(original, self, x, residual=None, post_residual_addition=None):
    """AROUND hook for :data:`NORMS`: ``forward_native`` where ``x`` is float32, else ``original``."""
    if x.dtype == torch.float32:
        return self.forward_native(x, residual, post_residual_addition)
    return original(self, x, residual, post_residual_addition)


def rope_forward_cuda(original, self, positions, query, key, offsets=None, fused_set_kv_buffer_arg=None):
    """AROUND hook for :data:`ROPE`: ``forward_native`` where ``query`` is float32 and no fused KV
    write is asked for, else ``original``. Returns ``(query, key)`` rotated, ``[tokens, heads *
    head_size]`` each, as the original does."""
    if query.dtype == torch.float32 and fused_set_kv_buffer_arg is None:
        return self.forward_native(positions, query, key, offsets)
    return original(self, positions, query, key, offsets, fused_set_kv_buffer_arg)


GDN_PREFILL = "sglang.srt.layers.attention.linear.kernels.gdn_triton.TritonGDNKernel.extend"


def gdn_prefill_extend(original, self, q, k, v, g, beta, **kwargs):
    """AROUND hook for :data:`GDN_PREFILL`: float32 ``q`` through
    :func:`.gdn_prefill_fp32.chunk_gdn_prefill` (``ssm_states``, ``cache_indices`` and
    ``query_start_loc`` from the keywords, the final states written into the pool); other dtypes
    go to ``original``. Returns ``(o, None, None)`` as sglang's kernel returns ``(o, None, h)``:
    the chunk states ``h`` serve only sglang's prefix-cache state tracking, which this route
    refuses (``NotImplementedError`` where state checkpoints are asked for: run the check with
    ``--disable-radix-cache``)."""
    if q.dtype != torch.float32:
        return original(self, q, k, v, g, beta, **kwargs)
    from .gdn_prefill_fp32 import chunk_gdn_prefill

    if kwargs.get("num_state_checkpoints"):
        raise NotImplementedError("the float32 GatedDeltaNet prefill route keeps no state checkpoints "
                                  "(prefix-cache state tracking): run the float32 check with --disable-radix-cache")
    o = chunk_gdn_prefill(q, k, v, g, beta, kwargs["ssm_states"], kwargs["cache_indices"],
                          kwargs["query_start_loc"])
    return o, None, None


# (target, AROUND hook) pairs the test plugin registers.
HOOKS = tuple((t, forward_cuda) for t in NORMS) + ((ROPE, rope_forward_cuda), (GDN_PREFILL, gdn_prefill_extend))
TARGETS = tuple(t for t, _ in HOOKS)
