"""Weight shapes of a Qwen3.5-style target's linear layers, and a test table for the skinny GEMM
flag (``--speculative-ddtree-gemm-table``, ``compat/skinny_linear.py``). Test and benchmark support;
not used when serving.

``qwen35_linear_shapes(config)``: ``{name: (N, K)}`` of the products sglang runs per layer, the
merged projections as sglang loads them:

    gdn_in_proj_qkvz  (2 * key_heads * key_dim + 2 * value_heads * value_dim, hidden)
    gdn_in_proj_ba    (2 * value_heads, hidden)
    gdn_out_proj      (hidden, value_heads * value_dim)
    attn_qkv_proj     ((2 if attn_output_gate else 1) * heads * head_dim + 2 * kv_heads * head_dim, hidden)
    attn_o_proj       (hidden, heads * head_dim)
    mlp_gate_up       (2 * intermediate, hidden)
    mlp_down          (hidden, intermediate)
    lm_head           (vocab, hidden)

``forced_table(shapes, tokens, tiling)``: a table in ``bench_skinny_gemm.py``'s format whose every
row names ``tiling`` as the winner (``best_vs_cublas`` 0), so a server given it sends each listed
product at each listed token count to the kernel: the lossless check of the kernel path, not a
speed claim.
"""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

from ..kernels.skinny_gemm import SILU_MUL


def qwen35_linear_shapes(config: dict) -> Dict[str, Tuple[int, int]]:
    """``config``: a Qwen3.5 text config as a dict (``config.json``'s keys). KeyError names a
    missing field."""
    c = config
    h, heads, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    qk = c["linear_num_key_heads"] * c["linear_key_head_dim"]
    vv = c["linear_num_value_heads"] * c["linear_value_head_dim"]
    q_rows = (2 if c.get("attn_output_gate", True) else 1) * heads * hd
    return {
        "gdn_in_proj_qkvz": (2 * qk + 2 * vv, h),
        "gdn_in_proj_ba": (2 * c["linear_num_value_heads"], h),
        "gdn_out_proj": (h, vv),
        "attn_qkv_proj": (q_rows + 2 * kv * hd, h),
        "attn_o_proj": (h, heads * hd),
        "mlp_gate_up": (2 * c["intermediate_size"], h),
        "mlp_down": (h, c["intermediate_size"]),
        "lm_head": (c["vocab_size"], h),
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
