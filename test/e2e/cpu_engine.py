"""Helpers to run real sglang on CPU in tests: Engine construction, HTTP servers, HF references."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
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


HARNESS = Path(__file__).resolve().parents[1] / "harness"  # the CPU stand-in for sgl_kernel

# ``env`` of a server whose scheduler must start by spawn, as users' servers do (test/conftest.py
# has the CPU test engines fork): None removes the variable.
SPAWN = {"SGLANG_DDTREE_TEST_FORK_CHILDREN": None}


def cpu_engine_env() -> Dict[str, str]:
    """What a spawned sglang process needs to run on sglang's CPU engine here: the CPU stand-in
    for ``sgl_kernel`` (``test/harness``) first on ``PYTHONPATH`` and ``SGLANG_USE_CPU_ENGINE=1``
    (test/conftest.py sets the same for the pytest process)."""
    import os

    path = [str(HARNESS)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(HARNESS)]
    return {"PYTHONPATH": os.pathsep.join(path), "SGLANG_USE_CPU_ENGINE": "1"}


def cpu_server_args(model: str, extra_args=()) -> List[str]:
    """``sglang.launch_server`` arguments of a CPU test server on the tiny ``model`` (float32, a
    4096-token KV pool, at most 8 running requests, no overlap scheduling), then ``extra_args``."""
    return [
        "--model-path", str(tiny_models.model_path(model)),
        "--device", "cpu", "--dtype", "float32", "--mem-fraction-static", "0.3",
        "--max-total-tokens", "4096", "--max-running-requests", "8",
        "--disable-overlap-schedule", "--log-level", "warning", *map(str, extra_args),
    ]


class ServerStartError(RuntimeError):
    """An HTTP server exited or never became healthy; the message ends with its log's tail."""


@contextlib.contextmanager
def http_server(args, log_path, env=None, startup_timeout_s: int = 300):
    """Run ``python -m sglang.launch_server ARGS --host 127.0.0.1 --port <free port>`` (its own
    process group; stdout and stderr to ``log_path``; the environment plus ``env``) until the
    block exits, then SIGTERM the group (SIGKILL after 30 s). A variable ``env`` maps to None is
    removed.

    Yields ``(base_url, process)`` once ``/health_generate`` answers 200. Raises
    :class:`ServerStartError` if the process exits first or ``startup_timeout_s`` passes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import requests

    port = free_port()
    cmd = [sys.executable, "-m", "sglang.launch_server", *map(str, args),
           "--host", "127.0.0.1", "--port", str(port)]
    with open(log_path, "w") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT,
            env={k: v for k, v in dict(os.environ, **(env or {})).items() if v is not None},
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + startup_timeout_s
    try:
        while True:
            if proc.poll() is not None:
                raise ServerStartError(f"server exited with {proc.returncode}:\n{open(log_path).read()[-4000:]}")
            try:
                if requests.get(base + "/health_generate", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.time() > deadline:
                raise ServerStartError(f"server did not become healthy:\n{open(log_path).read()[-4000:]}")
            time.sleep(1)
        yield base, proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def cpu_server(model: str, log_path, extra_args=(), env=None, startup_timeout_s: int = 300):
    """Run ``python -m sglang.launch_server`` on CPU with a tiny model until the block exits
    (:func:`cpu_server_args`, :func:`http_server`).

    Yields (base_url, process). Fails the test with the server log's tail if the server
    exits or never becomes healthy.
    """
    import pytest

    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(http_server(cpu_server_args(model, extra_args), log_path, env,
                                                     startup_timeout_s))
        except ServerStartError as e:
            pytest.fail(str(e))
        yield handle
