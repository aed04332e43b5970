"""Real ``python -m sglang.launch_server`` on CPU: /generate, /v1/completions and
/v1/chat/completions, greedy, checked against Hugging Face transformers (float32).

Runs the server twice: without speculation and with the stock DFLASH chain, so the OpenAI
endpoints are covered on the speculative path too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from cpu_engine import PROMPTS, dflash_kwargs, hf_greedy
from sglang_ddtree import tiny_models

pytestmark = pytest.mark.e2e

MAX_NEW = 20
STARTUP_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(kwargs: dict) -> list:
    args = []
    for k, v in kwargs.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return args


@pytest.fixture(scope="module", params=["plain", "dflash"])
def server(request, tmp_path_factory):
    port = _free_port()
    extra = dflash_kwargs() if request.param == "dflash" else {}
    cmd = [
        sys.executable, "-m", "sglang.launch_server",
        "--model-path", str(tiny_models.model_path("llama")),
        "--device", "cpu", "--dtype", "float32", "--mem-fraction-static", "0.3",
        "--max-total-tokens", "4096", "--max-running-requests", "8",
        "--disable-overlap-schedule", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning",
    ] + _cli(extra)
    log = tmp_path_factory.mktemp("server") / "server.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + STARTUP_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                if requests.get(base + "/health_generate", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.time() > deadline:
                pytest.fail(f"server did not become healthy:\n{log.read_text()[-4000:]}")
            time.sleep(1)
        yield base, request.param
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))


def test_generate_endpoint_token_ids_equal_hf(server):
    base, mode = server
    r = requests.post(
        base + "/generate",
        json={"input_ids": PROMPTS, "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW}},
        timeout=120,
    )
    r.raise_for_status()
    outs = r.json()
    for prompt, out in zip(PROMPTS, outs):
        assert out["output_ids"] == hf_greedy("llama", tuple(prompt), MAX_NEW)
        if mode == "dflash":
            assert out["meta_info"]["spec_verify_ct"] > 0


def test_completions_endpoint_equals_hf(server):
    base, _ = server
    tok = _tokenizer()
    prompt = "the tree draft token"
    ids = tok(prompt)["input_ids"]
    r = requests.post(
        base + "/v1/completions",
        json={"model": "tiny", "prompt": prompt, "max_tokens": MAX_NEW, "temperature": 0},
        timeout=120,
    )
    r.raise_for_status()
    body = r.json()
    want = hf_greedy("llama", tuple(ids), MAX_NEW)
    assert body["usage"]["completion_tokens"] == len(want)
    assert body["choices"][0]["text"] == tok.decode(want, skip_special_tokens=True)


def test_chat_completions_endpoint_equals_hf(server):
    base, _ = server
    tok = _tokenizer()
    messages = [{"role": "user", "content": "verify the block path"}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    r = requests.post(
        base + "/v1/chat/completions",
        json={"model": "tiny", "messages": messages, "max_tokens": MAX_NEW, "temperature": 0},
        timeout=120,
    )
    r.raise_for_status()
    body = r.json()
    want = hf_greedy("llama", tuple(ids), MAX_NEW)
    assert body["usage"]["prompt_tokens"] == len(ids)
    assert body["usage"]["completion_tokens"] == len(want)
    assert body["choices"][0]["message"]["content"] == tok.decode(want, skip_special_tokens=True)
