"""Weight shapes of a Qwen3.5-style target's linear layers, and a test table for the skinny GEMM
flag (``--speculative-ddtree-gemm-table``, ``compat/skinny_linear.py``). Test and benchmark support;
not used when serving.

``qwen35_linear_shapes(config, tp=1)``: ``{name: (N, K)}`` of the products sglang runs per layer
on one of ``tp`` tensor-parallel ranks, the merged projections as sglang loads them (at ``tp`` 1):

    gdn_in_proj_qkvz  (2 * key_heads * key_dim + 2 * value_heads * value_dim, hidden)
    gdn_in_proj_ba    (2 * value_heads, hidden)
    gdn_out_proj      (hidden, value_heads * value_dim)
    attn_qkv_proj     ((2 if attn_output_gate else 1) * heads * head_dim + 2 * kv_heads * head_dim, hidden)
    attn_o_proj       (hidden, heads * head_dim)
    mlp_gate_up       (2 * intermediate, hidden)
    mlp_down          (hidden, intermediate)
    lm_head           (vocab, hidden)

At ``tp`` > 1 each rank holds a slice: the column-parallel products (in_proj_qkvz, in_proj_ba,
qkv_proj, gate_up) ``N / tp`` (qkv_proj: ``heads / tp`` query heads and ``max(1, kv_heads / tp)``
key / value heads, replicated where ``tp`` exceeds them), the row-parallel ones (out_proj, o_proj,
down) ``K / tp``, the lm_head its vocabulary padded to a multiple of 64, ``/ tp``.

``forced_table(shapes, tokens, tiling)``: a table in ``bench_skinny_gemm.py``'s format whose every
row names ``tiling`` as the winner (``best_vs_cublas`` 0), so a server given it sends each listed
product at each listed token count to the kernel: the lossless check of the kernel path, not a
speed claim.
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

from ..kernels.skinny_gemm import SILU_MUL


def qwen35_linear_shapes(config: dict, tp: int = 1) -> Dict[str, Tuple[int, int]]:
    """``config``: a Qwen3.5 text config as a dict (``config.json``'s keys); ``tp``: the
    tensor-parallel size. KeyError names a missing field; ValueError a ``tp`` that does not divide
    the heads, the linear heads, the intermediate size or the padded vocabulary (sglang refuses
    those too), or that is not a multiple of the key / value heads it exceeds."""
    c = config
    h, heads, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    kh, vh = c["linear_num_key_heads"], c["linear_num_value_heads"]
    inter = c["intermediate_size"]
    vocab = -(-c["vocab_size"] // 64) * 64
    if tp < 1 or any(x % tp for x in (heads, kh, vh, inter, vocab)) or (kv % tp if tp <= kv else tp % kv):
        raise ValueError(f"tp {tp} does not split this model: attention heads {heads} (key / value {kv}), "
                         f"linear key / value heads {kh} / {vh}, intermediate {inter}, padded vocabulary {vocab}")
    qk = kh // tp * c["linear_key_head_dim"]
    vv = vh // tp * c["linear_value_head_dim"]
    q_rows = (2 if c.get("attn_output_gate", True) else 1) * heads // tp * hd
    return {
        "gdn_in_proj_qkvz": (2 * qk + 2 * vv, h),
        "gdn_in_proj_ba": (2 * vh // tp, h),
        "gdn_out_proj": (h, vv),
        "attn_qkv_proj": (q_rows + 2 * max(1, kv // tp) * hd, h),
        "attn_o_proj": (h, heads // tp * hd),
        "mlp_gate_up": (2 * inter // tp, h),
        "mlp_down": (h, inter // tp),
        "lm_head": (vocab // tp, h),
    }


def forced_table(shapes: Dict[str, Tuple[int, int]], tokens: Iterable[int], tiling: str, device: str,
                 fused_down: bool = True) -> dict:
    """``{"meta": {"device": device, ...}, "rows": [...]}``: one row per (token count, shape), plus
    the down projection with the activation inside (``act: "silu_mul"``) where ``fused_down``.
    ``device``: the GPU name the table claims (the flag refuses a table of another GPU)."""
    rows = []
    for m in tokens:
        for name, (n, k) in shapes.items():
            rows.append(dict(m=int(m), shape=name, n=n, k=k, act=None, best=tiling, best_vs_cublas=0.0))
        if fused_down and "mlp_down" in shapes:
            n, k = shapes["mlp_down"]
            rows.append(dict(m=int(m), shape="mlp_down", n=n, k=k, act=SILU_MUL, best=tiling, best_vs_cublas=0.0))
    return {"meta": {"device": device, "note": "test table (forced_table): not a measurement"}, "rows": rows}
