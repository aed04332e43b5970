"""Real ``python -m sglang.launch_server`` on CPU: /generate, /v1/completions and
/v1/chat/completions, greedy, checked against Hugging Face transformers (float32).

The server runs without speculation here (the CPU harness against transformers); the same
endpoints on the speculative path are test_ddtree_http_cpu.py's (DDTREE through the DFLASH
machinery at pages 1 and 16), and sglang's DFLASH chain on CPU is test_engine_cpu.py's.
"""

from __future__ import annotations


import pytest
import requests

from cpu_engine import PROMPTS, SPAWN, cpu_server, hf_greedy
from sglang_ddtree.testing import tiny_models

pytestmark = pytest.mark.e2e

MAX_NEW = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with cpu_server("llama", log, [], env=SPAWN) as (base, _):  # started as users' servers are
        yield base, "plain"


def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))


def test_generate_endpoint_token_ids_equal_hf(server):
    base, _ = server
    r = requests.post(
        base + "/generate",
        json={"input_ids": PROMPTS, "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW}},
        timeout=120,
    )
    r.raise_for_status()
    outs = r.json()
    for prompt, out in zip(PROMPTS, outs):
        assert out["output_ids"] == hf_greedy("llama", tuple(prompt), MAX_NEW)


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
