"""Helpers to run real sglang on CPU in tests: Engine construction, HF references."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Dict, List

from sglang_ddtree import tiny_models

# Prompts of mixed lengths (token ids of the tiny tokenizer's vocabulary).
PROMPTS: List[List[int]] = [
    [5, 6, 7, 8, 9],
    [100, 200, 300],
    [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29],
    [400],
]


def engine_kwargs(model: str = "llama", **extra) -> Dict:
    kw = dict(
        model_path=str(tiny_models.model_path(model)),
        device="cpu",
        dtype="float32",
        mem_fraction_static=0.3,
        max_total_tokens=4096,
        max_running_requests=8,
        # record_stream / stream overlap has no meaning on CPU; the overlap scheduler is a
        # GPU feature and is exercised by the GPU suite.
        disable_overlap_schedule=True,
        log_level="error",
    )
    kw.update(extra)
    return kw


def dflash_kwargs(model: str = "llama") -> Dict:
    return dict(
        speculative_algorithm="DFLASH",
        speculative_draft_model_path=str(tiny_models.model_path(f"dflash-{model}")),
    )


def standalone_topk2_kwargs(model: str = "llama") -> Dict:
    # The target drafts for itself: cheap, and it makes acceptance really happen.
    return dict(
        speculative_algorithm="STANDALONE",
        speculative_draft_model_path=str(tiny_models.model_path(model)),
        speculative_num_steps=3,
        speculative_eagle_topk=2,
        speculative_num_draft_tokens=4,
    )


@functools.lru_cache(maxsize=None)
def hf_greedy(model: str, prompt: tuple, max_new_tokens: int) -> List[int]:
    """Greedy continuation from Hugging Face transformers (float32), stopping at EOS."""
    import torch
    from transformers import AutoModelForCausalLM

    m = _hf_model(model)
    out = m.generate(
        torch.tensor([list(prompt)]), max_new_tokens=max_new_tokens, do_sample=False,
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
    )
    return out[0, len(prompt) :].tolist()


@functools.lru_cache(maxsize=None)
def _hf_model(model: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_models.model_path(model)), dtype=torch.float32).eval()


def greedy(max_new_tokens: int = 24, **kw) -> Dict:
    return dict(temperature=0.0, max_new_tokens=max_new_tokens, **kw)
