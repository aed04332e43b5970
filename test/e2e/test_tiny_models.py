"""The tiny-model factory is deterministic and builds the structures the issues ask for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sglang_ddtree.testing import tiny_models


def test_factory_is_deterministic_across_build_dirs(tmp_path):
    # Build in two fresh directories, each in a process of its own, and compare file hashes (not
    # with the shared cache: a cache built under another sglang release's transformers records
    # that version in config.json).
    code = (
        "from sglang_ddtree.testing import tiny_models as t;"
        "print(t.fingerprint('llama'));print(t.fingerprint('dflash-llama'))"
    )
    builds = []
    for d in ("a", "b"):
        env = dict(__import__("os").environ, SGLANG_DDTREE_BUILD_DIR=str(tmp_path / d))
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
        builds.append(out.stdout.split())
    assert builds[0] == builds[1] and len(builds[0]) == 2


def test_tokenizer_has_special_tokens_and_chat_template():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))
    assert len(tok) <= tiny_models.VOCAB_SIZE
    text = tok.apply_chat_template(
        [{"role": "user", "content": "the tree"}], add_generation_prompt=True, tokenize=False
    )
    assert text.startswith("<|im_start|>user\nthe tree<|im_end|>") and text.endswith("assistant\n")
    assert tok.convert_tokens_to_ids("<|mask|>") != tok.unk_token_id


def test_hybrid_target_is_three_gdn_per_attention_layer():
    cfg = json.loads((tiny_models.model_path("qwen35") / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_5_text"
    types = cfg["layer_types"]
    assert len(types) % 4 == 0
    for i in range(0, len(types), 4):
        assert types[i : i + 4] == ["linear_attention"] * 3 + ["full_attention"]


@pytest.mark.parametrize("target", ["llama", "qwen35"])
def test_dflash_drafter_has_the_structure_sglang_loads(target):
    draft = tiny_models.model_path(f"dflash-{target}")
    cfg = json.loads((draft / "config.json").read_text())
    tgt = json.loads((tiny_models.model_path(target) / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"]
    d = cfg["dflash_config"]
    assert d["block_size"] == 16
    assert all(0 <= i < tgt["num_hidden_layers"] for i in d["target_layer_ids"])
    assert cfg["layer_types"] == ["sliding_attention", "full_attention"]
    assert cfg["use_sliding_window"] is True and cfg["sliding_window"] > 0
    assert cfg["hidden_size"] == tgt["hidden_size"]
    from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

    parsed = parse_dflash_draft_config(draft_hf_config=cfg)
    assert parsed.mask_token == "<|mask|>" and parsed.mask_token_id is not None
    from safetensors import safe_open

    with safe_open(str(draft / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        fc = f.get_tensor("fc.weight")
    assert fc.shape == (cfg["hidden_size"], len(d["target_layer_ids"]) * cfg["hidden_size"])
    assert "layers.1.self_attn.q_proj.weight" in keys and "embed_tokens.weight" not in keys
