"""Qwen3.6-27B and its 5-layer DFlash drafter, as sglang model folders with *no weights*:
sglang serves them with ``--load-format dummy`` (random bf16 weights made in GPU memory), so the
full-size step cost can be measured on a GPU host without downloading anything (issue:
benchmarks at Qwen3.6-27B scale, item 1). Speed per step does not depend on the weight values;
acceptance does, and is measured separately (accept_sweep.py).

Shapes (``../shared/design/ddtree.md`` section 2; check against a real checkpoint config when one
is available): 64 layers = 16 x (3 GatedDeltaNet + 1 gated full attention), hidden 5120, FFN
17408, vocab 248320; attention 24 Q / 4 KV heads of 256, partial RoPE 64 dims, theta 1e7,
output gate; GDN 16 QK heads, 48 V heads, head dims 128, conv 4. Drafter: 5 layers (4 sliding
window 2048 + 1 full), hidden 5120, 32 / 8 heads of 128, FFN 17408 (assumed: the target's),
block 16, mask token 248070, target layers [1, 16, 31, 46, 61].

``--scale s`` divides every width (hidden, FFN, head counts, vocab) by ``s`` and the layer
counts by ``s`` rounded to the 4-layer pattern, keeping the structure: a CPU-sized stand-in to
check the generator and the dummy-load path (``--scale 32`` serves on CPU).

    python benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36            # full size
    python benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36-s32 --scale 32
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FULL = dict(
    layers=64, hidden=5120, ffn=17408, vocab=248320, heads=24, kv_heads=4, head_dim=256,
    rope_dims=64, rope_theta=1.0e7, gdn_qk_heads=16, gdn_v_heads=48, gdn_head_dim=128, conv=4,
    draft_layers=5, draft_heads=32, draft_kv_heads=8, draft_head_dim=128, block=16,
    mask_token_id=248070, target_layers=[1, 16, 31, 46, 61], sliding_window=2048,
)


def shapes(scale: int = 1) -> dict:
    """The shape table at ``1/scale`` width (scale 1: the real model)."""
    s = dict(FULL)
    if scale == 1:
        return s
    div = lambda x, lo=1: max(lo, x // scale)  # noqa: E731
    s.update(
        layers=max(4, FULL["layers"] // scale // 4 * 4), hidden=div(5120, 64), ffn=div(17408, 64),
        vocab=div(248320, 512), heads=div(24, 2), kv_heads=div(4, 1), head_dim=div(256, 32),
        rope_dims=div(64, 8), gdn_qk_heads=div(16, 1), gdn_v_heads=div(48, 2), gdn_head_dim=div(128, 16),
        draft_heads=div(32, 2), draft_kv_heads=div(8, 1), draft_head_dim=div(128, 16),
    )
    s["gdn_v_heads"] = max(s["gdn_qk_heads"], s["gdn_v_heads"] // s["gdn_qk_heads"] * s["gdn_qk_heads"])
    s["mask_token_id"] = s["vocab"] - 2
    s["target_layers"] = sorted({min(s["layers"] - 1, max(1, t * s["layers"] // 64)) for t in FULL["target_layers"]})
    return s


def _common(s: dict) -> dict:
    """Fields the target and the drafter share (the drafter uses the target's vocabulary,
    widths and special tokens)."""
    return {
        "vocab_size": s["vocab"], "hidden_size": s["hidden"], "intermediate_size": s["ffn"],
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "eos_token_id": s["vocab"] - 1,
    }


def target_config(s: dict) -> dict:
    n = s["layers"]
    return {
        **_common(s),
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "num_hidden_layers": n,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)],
        "full_attention_interval": 4,
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"], "head_dim": s["head_dim"],
        "attn_output_gate": True,
        "partial_rotary_factor": s["rope_dims"] / s["head_dim"],
        "rope_parameters": {"rope_type": "default", "rope_theta": s["rope_theta"],
                            "partial_rotary_factor": s["rope_dims"] / s["head_dim"]},
        "linear_conv_kernel_dim": s["conv"], "linear_key_head_dim": s["gdn_head_dim"],
        "linear_value_head_dim": s["gdn_head_dim"], "linear_num_key_heads": s["gdn_qk_heads"],
        "linear_num_value_heads": s["gdn_v_heads"],
        "bos_token_id": None, "pad_token_id": None,
    }


def drafter_config(s: dict) -> dict:
    n = s["draft_layers"]
    return {
        **_common(s),
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": n, "num_attention_heads": s["draft_heads"],
        "num_key_value_heads": s["draft_kv_heads"], "head_dim": s["draft_head_dim"],
        "use_sliding_window": True, "sliding_window": s["sliding_window"], "max_window_layers": 0,
        "layer_types": ["sliding_attention"] * (n - 1) + ["full_attention"],
        "rope_parameters": {"rope_type": "default", "rope_theta": s["rope_theta"]},
        "block_size": s["block"], "num_target_layers": s["layers"],
        "dflash_config": {"block_size": s["block"], "target_layer_ids": s["target_layers"],
                          "mask_token_id": s["mask_token_id"]},
    }


def param_bytes(s: dict, dtype_bytes: int = 2) -> dict:
    """Weight bytes of the target and the drafter (what one decode/verify step must read)."""
    h, f, v = s["hidden"], s["ffn"], s["vocab"]
    attn = h * s["heads"] * s["head_dim"] * 2 + 2 * h * s["kv_heads"] * s["head_dim"] + s["heads"] * s["head_dim"] * h
    qk = s["gdn_qk_heads"] * s["gdn_head_dim"]
    vv = s["gdn_v_heads"] * s["gdn_head_dim"]
    gdn = h * (2 * qk + 2 * vv + 2 * s["gdn_v_heads"]) + (2 * qk + vv) * s["conv"] + vv * h
    mlp = 3 * h * f
    n_attn = s["layers"] // 4
    target = n_attn * (attn + mlp) + (s["layers"] - n_attn) * (gdn + mlp) + 2 * v * h
    d_attn = h * s["draft_heads"] * s["draft_head_dim"] * 2 + 2 * h * s["draft_kv_heads"] * s["draft_head_dim"]
    drafter = s["draft_layers"] * (d_attn + mlp) + len(s["target_layers"]) * h * h
    return {"target": target * dtype_bytes, "drafter": drafter * dtype_bytes}


def write(out: Path, scale: int = 1) -> dict:
    """Write ``out/target`` and ``out/drafter`` (config.json each); returns the shape table."""
    s = shapes(scale)
    for name, cfg in (("target", target_config(s)), ("drafter", drafter_config(s))):
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg, indent=1))
    (out / "shapes.json").write_text(json.dumps({"scale": scale, "shapes": s, "weight_bytes": param_bytes(s)}, indent=1))
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scale", type=int, default=1)
    a = ap.parse_args()
    s = write(a.out, a.scale)
    b = param_bytes(s)
    print(f"[qwen36_shapes] {a.out}: target {b['target'] / 2**30:.1f} GiB, drafter {b['drafter'] / 2**30:.2f} GiB (bf16)")


if __name__ == "__main__":
    main()
