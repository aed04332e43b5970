"""Deterministic tiny models for tests, demos and benchmarks: no downloads.

Everything here is built from a fixed seed in seconds and cached under a build
directory (``$SGLANG_DDTREE_BUILD_DIR`` or ``<repo>/build/tiny``):

- ``tokenizer``: a byte-level BPE tokenizer trained on synthetic text, with the special
  tokens a chat model and a DFlash drafter need (``<|endoftext|>``, ``<|im_start|>``,
  ``<|im_end|>``, ``<|mask|>``) and a ChatML chat template.
- ``llama``: a tiny Llama-style target (4 layers).
- ``qwen35``: a tiny Qwen3.5-style hybrid target (``model_type qwen3_5_text``, 3 GatedDeltaNet
  layers for every gated full-attention layer), the structure of Qwen3.6-27B scaled down.
- ``dflash-llama`` / ``dflash-qwen35``: tiny DFlash drafters in the layout sglang's
  ``DFlashDraftModel`` loads (target-layer ids, block size 16, mask token, sliding + full layers).

Weights are random, so a drafter built here accepts (almost) nothing; they exist to exercise
the serving machinery, not to be fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Callable, Dict

from ..config import BUILD_DIR

# Bump when the recipe changes so cached directories are rebuilt.
RECIPE_VERSION = "3"

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
VOCAB_SIZE = 512
DFLASH_BLOCK_SIZE = 16

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_WORDS = (
    "the a tree draft token verify accept model layer state block path node depth budget "
    "fast slow river stone light cloud green blue seven three nine apple table window "
    "def return if else for while print value list dict key item index sum count"
).split()


def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def build_dir() -> Path:
    env = BUILD_DIR.get()
    base = Path(env) if env else repo_root() / "build"
    return base / "tiny"


def _synthetic_corpus(n_lines: int = 4000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        n = rng.randint(4, 16)
        words = [rng.choice(_WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.append(str(rng.randint(0, 999)))
        lines.append(" ".join(words) + rng.choice([".", "!", "?", ":", ""]))
    return lines


def _atomic_build(name: str, builder: Callable[[Path], None]) -> Path:
    return atomic_build(build_dir() / f"{name}-v{RECIPE_VERSION}", builder)


def atomic_build(out: Path, builder: Callable[[Path], None]) -> Path:
    """Run ``builder`` into a temp dir beside ``out`` and rename it there, once: concurrent
    processes never see half a model, and a finished ``out`` is reused."""
    if (out / ".complete").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp.{os.getpid()}"
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir()
    builder(tmp)
    (tmp / ".complete").write_text("ok\n")
    try:
        tmp.rename(out)
    except OSError:
        # Another process finished first; its copy is identical (same seed).
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _write_tokenizer(dst: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_synthetic_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<|mask|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(dst))


def tokenizer_path() -> Path:
    return _atomic_build("tokenizer", _write_tokenizer)


def _tok_ids() -> Dict[str, int]:
    data = json.loads((tokenizer_path() / "tokenizer.json").read_text())
    ids = {t["content"]: t["id"] for t in data["added_tokens"]}
    return ids


def _copy_tokenizer(dst: Path) -> None:
    import shutil

    for f in tokenizer_path().iterdir():
        if f.name != ".complete":
            shutil.copy(f, dst / f.name)


def _save_random_model(config, dst: Path, seed: int, scale: float) -> None:
    """Random-init a HF model with a fixed seed and save it as float32 safetensors.

    ``scale`` widens the init so next-token logits are well separated: greedy argmax then
    does not hinge on float rounding, which keeps engine-vs-HF equality meaningful.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, scale / max(1.0, p.shape[-1] ** 0.5))
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(str(dst), safe_serialization=True)
    _copy_tokenizer(dst)


def _common_ids() -> Dict[str, int]:
    ids = _tok_ids()
    return {
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "bos_token_id": None,
    }


def _build_llama(dst: Path, head_dim: int = 16, seed: int = 1) -> None:
    from transformers import LlamaConfig

    cfg = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=2048,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        torch_dtype="float32",
        **_common_ids(),
    )
    cfg.architectures = ["LlamaForCausalLM"]
    _save_random_model(cfg, dst, seed=seed, scale=1.0)


def _build_qwen35(dst: Path, head_dim: int = 32, seed: int = 2) -> None:
    from transformers import Qwen3_5TextConfig

    n_layers = 8
    layer_types = [
        "full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n_layers)
    ]
    cfg = Qwen3_5TextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=n_layers,
        layer_types=layer_types,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        max_position_embeddings=2048,
        rms_norm_eps=1e-6,
        partial_rotary_factor=0.25,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
        tie_word_embeddings=False,
        torch_dtype="float32",
        **_common_ids(),
    )
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    # sglang's Qwen3.5 text config derives its layer kinds from this (as Qwen3-Next does);
    # real Qwen3.5 checkpoints carry it, transformers' config class does not.
    cfg.full_attention_interval = 4
    _save_random_model(cfg, dst, seed=seed, scale=1.0)


def _dflash_config(target_dir: Path, target_layer_ids: list[int], head_dim: int = 16):
    from transformers import Qwen3Config

    tgt = json.loads((target_dir / "config.json").read_text())
    ids = _tok_ids()
    cfg = Qwen3Config(
        vocab_size=tgt["vocab_size"],
        hidden_size=tgt["hidden_size"],
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=2048,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        # Same structure as z-lab's drafters: sliding-window layers then one full,
        # non-causal layer. Qwen3Config drops sliding_window unless this is set.
        use_sliding_window=True,
        sliding_window=2048,
        max_window_layers=0,
        layer_types=["sliding_attention", "full_attention"],
        tie_word_embeddings=False,
        eos_token_id=tgt.get("eos_token_id"),
        pad_token_id=tgt.get("pad_token_id"),
    )
    cfg.architectures = ["DFlashDraftModel"]
    cfg.block_size = DFLASH_BLOCK_SIZE
    cfg.num_target_layers = tgt["num_hidden_layers"]
    cfg.dflash_config = {
        "block_size": DFLASH_BLOCK_SIZE,
        "target_layer_ids": target_layer_ids,
        "mask_token": "<|mask|>",
        "mask_token_id": ids["<|mask|>"],
    }
    return cfg


def _save_random_dflash(cfg, dst: Path, seed: int) -> None:
    """Write a DFlash drafter checkpoint (no embedding / lm_head: those are the target's)."""
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    h = cfg.hidden_size
    hd = cfg.head_dim
    nq, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    inter = cfg.intermediate_size
    k_feat = len(cfg.dflash_config["target_layer_ids"])

    def w(*shape):
        return torch.randn(*shape, generator=g) / shape[-1] ** 0.5

    sd = {}
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = w(nq * hd, h)
        sd[p + "self_attn.k_proj.weight"] = w(nkv * hd, h)
        sd[p + "self_attn.v_proj.weight"] = w(nkv * hd, h)
        sd[p + "self_attn.o_proj.weight"] = w(h, nq * hd)
        sd[p + "self_attn.q_norm.weight"] = torch.ones(hd)
        sd[p + "self_attn.k_norm.weight"] = torch.ones(hd)
        sd[p + "input_layernorm.weight"] = torch.ones(h)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(h)
        sd[p + "mlp.gate_proj.weight"] = w(inter, h)
        sd[p + "mlp.up_proj.weight"] = w(inter, h)
        sd[p + "mlp.down_proj.weight"] = w(h, inter)
    sd["norm.weight"] = torch.ones(h)
    sd["fc.weight"] = w(h, k_feat * h)
    sd["hidden_norm.weight"] = torch.ones(h)
    save_file({k: v.contiguous() for k, v in sd.items()}, str(dst / "model.safetensors"))
    d = cfg.to_dict()
    d["dtype"] = "float32"
    (dst / "config.json").write_text(json.dumps(d, indent=2, sort_keys=True))
    _copy_tokenizer(dst)


def _build_dflash_llama(dst: Path) -> None:
    target = model_path("llama")
    _save_random_dflash(_dflash_config(target, [1, 2]), dst, seed=3)


def _build_dflash_qwen35(dst: Path) -> None:
    target = model_path("qwen35")
    _save_random_dflash(_dflash_config(target, [1, 5]), dst, seed=4)


# Head dim 64 (target and drafter): for attention backends that refuse 16 (flashinfer's merge
# kernels) and for FA3.
def _build_llama64(dst: Path) -> None:
    _build_llama(dst, head_dim=64, seed=5)


def _build_qwen3564(dst: Path) -> None:
    _build_qwen35(dst, head_dim=64, seed=6)


def _build_dflash_llama64(dst: Path) -> None:
    _save_random_dflash(_dflash_config(model_path("llama64"), [1, 2], head_dim=64), dst, seed=7)


def _build_dflash_qwen3564(dst: Path) -> None:
    _save_random_dflash(_dflash_config(model_path("qwen3564"), [1, 5], head_dim=64), dst, seed=8)


_BUILDERS: Dict[str, Callable[[Path], None]] = {
    "tokenizer": _write_tokenizer,
    "llama": _build_llama,
    "qwen35": _build_qwen35,
    "dflash-llama": _build_dflash_llama,
    "dflash-qwen35": _build_dflash_qwen35,
    "llama64": _build_llama64,
    "qwen3564": _build_qwen3564,
    "dflash-llama64": _build_dflash_llama64,
    "dflash-qwen3564": _build_dflash_qwen3564,
}


def model_path(name: str) -> Path:
    """Path of the cached tiny model ``name`` (built on first use)."""
    if name not in _BUILDERS:
        raise KeyError(f"unknown tiny model {name!r}; choose from {sorted(_BUILDERS)}")
    return _atomic_build(name, _BUILDERS[name])


def fingerprint(name: str) -> str:
    """Hash of a built model's files: lets tests assert the factory is deterministic."""
    return dir_digest(model_path(name))


def dir_digest(root: Path) -> str:
    """sha256 hex digest of a model directory: the names and bytes of its files, in name order
    (subdirectories and the build marker ``.complete`` left out)."""
    h = hashlib.sha256()
    for f in sorted(Path(root).iterdir()):
        if f.name == ".complete" or not f.is_file():
            continue
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                h.update(chunk)
    return h.hexdigest()


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Build the tiny test models (cached).")
    ap.add_argument("names", nargs="*", default=list(_BUILDERS))
    args = ap.parse_args()
    for n in args.names:
        print(n, model_path(n))


if __name__ == "__main__":
    main()
