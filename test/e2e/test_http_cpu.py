"""Real ``python -m sglang.launch_server`` on CPU: /generate, /v1/completions and
/v1/chat/completions, greedy, checked against Hugging Face transformers (float32).

Runs the server twice: without speculation and with the stock DFLASH chain, so the OpenAI
endpoints are covered on the speculative path too.
"""

from __future__ import annotations


import pytest
import requests

from cpu_engine import PROMPTS, cpu_server, dflash_kwargs, hf_greedy
from sglang_ddtree.testing import tiny_models

pytestmark = pytest.mark.e2e

MAX_NEW = 20


@pytest.fixture(scope="module", params=["plain", "dflash"])
def server(request, tmp_path_factory):
    extra = dflash_kwargs() if request.param == "dflash" else {}
    args = [a for k, v in extra.items() for a in (f"--{k.replace('_', '-')}", v)]
    log = tmp_path_factory.mktemp("server") / "server.log"
    with cpu_server("llama", log, args) as (base, _):
        yield base, request.param


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
