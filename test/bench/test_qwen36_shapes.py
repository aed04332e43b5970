"""benchmark/ddtree/qwen36_shapes.py: the full-size shape table is Qwen3.6-27B's (27B
parameters, 48 GatedDeltaNet + 16 attention layers, the drafter's 5 layers reading target layers
1/16/31/46/61), and the written folders are configs transformers and sglang read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark" / "ddtree"))

import qwen36_shapes as q  # noqa: E402


def test_full_size_is_27b_with_the_hybrid_pattern(tmp_path):
    s = q.write(tmp_path, scale=1)
    params = q.param_bytes(s)["target"] / 2
    assert 26.5e9 < params < 28e9, params
    tgt = json.loads((tmp_path / "target" / "config.json").read_text())
    kinds = tgt["layer_types"]
    assert kinds.count("linear_attention") == 48 and kinds.count("full_attention") == 16
    assert kinds[:4] == ["linear_attention"] * 3 + ["full_attention"]
    d = json.loads((tmp_path / "drafter" / "config.json").read_text())
    assert d["num_hidden_layers"] == 5 and d["dflash_config"]["target_layer_ids"] == [1, 16, 31, 46, 61]
    assert d["layer_types"] == ["sliding_attention"] * 4 + ["full_attention"]
    assert d["dflash_config"]["mask_token_id"] == 248070 < tgt["vocab_size"]


def test_scaled_folders_load_as_configs(tmp_path):
    from transformers import AutoConfig

    s = q.write(tmp_path, scale=32)
    cfg = AutoConfig.from_pretrained(str(tmp_path / "target"))
    assert cfg.num_hidden_layers == s["layers"] and cfg.full_attention_interval == 4
    assert cfg.linear_num_value_heads % cfg.linear_num_key_heads == 0
    assert all(0 < t < s["layers"] for t in s["target_layers"])
