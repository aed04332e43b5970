"""Helpers to run real sglang on CPU in tests: Engine construction, HF references."""

from __future__ import annotations

import contextlib
import functools
from typing import Dict, List

from sglang_ddtree.testing import tiny_models

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

    m = _hf_model(model)
    out = m.generate(
        torch.tensor([list(prompt)]), max_new_tokens=max_new_tokens, do_sample=False,
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
    )
    return out[0, len(prompt) :].tolist()


def hf_logprobs(model: str, prompt, cont, temperature: float = 1.0):
    """``[len(cont), vocab]`` float32 log-probabilities of Hugging Face transformers' next-token
    distribution (at ``temperature``) before each token of ``cont`` (teacher forcing over
    ``prompt + cont``)."""
    import torch

    ids = torch.tensor([list(prompt) + list(cont)])
    with torch.no_grad():
        logits = _hf_model(model)(ids).logits[0, len(prompt) - 1: len(prompt) + len(cont) - 1]
    return torch.log_softmax(logits.float() / temperature, dim=-1)


@functools.lru_cache(maxsize=None)
def _hf_model(model: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_models.model_path(model)), dtype=torch.float32).eval()


def greedy(max_new_tokens: int = 24, **kw) -> Dict:
    return dict(temperature=0.0, max_new_tokens=max_new_tokens, **kw)


@contextlib.contextmanager
def patched_env(env):
    """Set environment variables for the block (spawned engine processes inherit them)."""
    import os

    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def cpu_server(model: str, log_path, extra_args=(), env=None, startup_timeout_s: int = 300):
    """Run ``python -m sglang.launch_server`` on CPU with a tiny model until the block exits.

    Yields (base_url, process). Fails the test with the server log's tail if the server
    exits or never becomes healthy.
    """
    import os
    import signal
    import subprocess
    import sys
    import time

    import pytest
    import requests

    port = free_port()
    cmd = [
        sys.executable, "-m", "sglang.launch_server",
        "--model-path", str(tiny_models.model_path(model)),
        "--device", "cpu", "--dtype", "float32", "--mem-fraction-static", "0.3",
        "--max-total-tokens", "4096", "--max-running-requests", "8",
        "--disable-overlap-schedule", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning", *map(str, extra_args),
    ]
    with open(log_path, "w") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})),
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + startup_timeout_s
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}:\n{open(log_path).read()[-4000:]}")
            try:
                if requests.get(base + "/health_generate", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.time() > deadline:
                pytest.fail(f"server did not become healthy:\n{open(log_path).read()[-4000:]}")
            time.sleep(1)
        yield base, proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
