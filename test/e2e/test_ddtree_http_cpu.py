"""DDTREE through ``python -m sglang.launch_server`` on CPU: the OpenAI-compatible and native
endpoints equal Hugging Face greedy output (and its log-probabilities, where asked), an aborted streaming request fails alone (the
server keeps serving, no KV leak under the strict idle memory check), and /server_info
reports the average accept length of real acceptance (oracle drafter, full paths). Each test
runs against a server with single-token KV pages and one with pages of 16 (the accepted path's
KV is moved there, not its slots permuted)."""

from __future__ import annotations

import json
import time

import pytest
import requests

from cpu_engine import PROMPTS, cpu_server, hf_greedy, hf_logprobs
from sglang_ddtree.testing import tiny_models
from sglang_ddtree.testing.oracle_drafter import write_oracle_file

pytestmark = pytest.mark.e2e

N = 33


@pytest.fixture(scope="module", params=[1, 16], ids=["page1", "page16"])
def server(tmp_path_factory, request):
    tmp = tmp_path_factory.mktemp(f"ddtree_http_page{request.param}")
    oracle = tmp / "oracle.json"
    write_oracle_file(oracle, "first", [(p, hf_greedy("llama", tuple(p), N)) for p in PROMPTS])
    args = [
        # Accept-length totals fold into /server_info at each decode log line.
        "--decode-log-interval", "1",
        "--enable-metrics",
        "--speculative-algorithm", "DDTREE",
        "--speculative-draft-model-path", str(tiny_models.model_path("dflash-llama")),
        "--speculative-ddtree-budget", "15", "--speculative-ddtree-topk", "4",
        "--page-size", str(request.param),
    ]
    env = {"SGLANG_DDTREE_TEST_ORACLE": str(oracle), "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": "1"}
    log = tmp / "server.log"
    with cpu_server("llama", log, args, env) as (base, proc):
        yield base, proc, log


def _generate(base, prompts, max_new=N):
    r = requests.post(base + "/generate", json={"input_ids": prompts, "sampling_params": {"temperature": 0, "max_new_tokens": max_new}}, timeout=120)
    r.raise_for_status()
    return r.json()


def test_generate_equals_hf_with_full_path_acceptance_and_server_info(server):
    base, _, _ = server
    outs = _generate(base, PROMPTS)
    for p, o in zip(PROMPTS, outs):
        assert o["output_ids"] == hf_greedy("llama", tuple(p), N)
        assert o["meta_info"]["spec_correct_drafts_histogram"] == [0] * 15 + [2]
    info = requests.get(base + "/server_info", timeout=30).json()
    avg = info["internal_states"][0]["avg_spec_accept_length"]
    # Health-check and warm-up requests (no oracle continuation, accept 1) dilute the mean.
    assert avg > 4, avg

    # DDTREE's own statistics (sglang_ddtree/metrics.py). This is the module's first request
    # batch: the only full-depth accepts are its 4 requests x 2 steps; every other request-step
    # (warm-up, health checks) accepted nothing. Every tree is the oracle's 15-deep chain.
    dd = info["internal_states"][0]["ddtree"]
    hist = dd["accept_length_histogram"]
    assert dd["budget"] == 15 and dd["max_depth"] == 15 and len(hist) == 16
    assert hist[15] == 8 and sum(hist) == dd["request_steps"] == hist[0] + 8, dd
    assert dd["depth_reached_histogram"][15] == dd["request_steps"] and dd["avg_tree_nodes"] == 15.0
    assert dd["avg_accept_length"] == pytest.approx((15 * 8 + dd["request_steps"]) / dd["request_steps"])

    # The same counts on the Prometheus endpoint (exported every --decode-log-interval steps).
    text = requests.get(base + "/metrics", timeout=30).text
    count = _metric(text, "sglang:ddtree_accept_length_count")
    total = _metric(text, "sglang:ddtree_accept_length_sum")
    assert count == dd["request_steps"] and total == 15 * 8, (count, total)
    assert _metric(text, "sglang:ddtree_depth_reached_count") == dd["request_steps"]
    assert _metric(text, "sglang:ddtree_tree_nodes_avg") == 15.0


def _metric(text, name):
    """Sum of a metric's samples over label sets (one scheduler here)."""
    vals = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name + "{") or line.startswith(name + " ")]
    assert vals, f"{name} not exported:\n" + "\n".join(x for x in text.splitlines() if "ddtree" in x)
    return sum(vals)


def test_openai_chat_equals_hf(server):
    base, _, _ = server
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))
    messages = [{"role": "user", "content": "the tree draft"}]
    ids = tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False), add_special_tokens=False)["input_ids"]
    r = requests.post(base + "/v1/chat/completions", json={"model": "tiny", "messages": messages, "max_tokens": 20, "temperature": 0}, timeout=120)
    r.raise_for_status()
    want = hf_greedy("llama", tuple(ids), 20)
    assert r.json()["choices"][0]["message"]["content"] == tok.decode(want, skip_special_tokens=True)


def test_openai_logprobs_equal_hf(server):
    """Log-probabilities through the OpenAI endpoints (completions with ``logprobs``, chat with
    ``logprobs`` / ``top_logprobs``) on a DDTREE server accepting full paths: within 1e-3 of
    Hugging Face's float32 log-softmax at each generated position, top entries in its order."""
    base, _, _ = server
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))
    prompt = PROMPTS[0]
    r = requests.post(base + "/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": N,
                                                      "temperature": 0, "logprobs": 3}, timeout=120)
    r.raise_for_status()
    lp = r.json()["choices"][0]["logprobs"]
    want = hf_greedy("llama", tuple(prompt), N)
    ref = hf_logprobs("llama", prompt, want)
    assert len(lp["token_logprobs"]) == len(want) == N
    for i, (tid, got) in enumerate(zip(want, lp["token_logprobs"])):
        assert abs(got - float(ref[i, tid])) < 1e-3, (i, got, float(ref[i, tid]))
        # (keyed by token text: top tokens decoding to the same text share a key, one value kept)
        top, hf_top = lp["top_logprobs"][i].values(), ref[i].topk(3).values.tolist()
        assert top and all(min(abs(v - h) for h in hf_top) < 1e-3 for v in top), i

    messages = [{"role": "user", "content": "the tree draft"}]
    ids = tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
              add_special_tokens=False)["input_ids"]
    r = requests.post(base + "/v1/chat/completions", json={"model": "tiny", "messages": messages, "max_tokens": 20,
                                                           "temperature": 0, "logprobs": True, "top_logprobs": 2},
                      timeout=120)
    r.raise_for_status()
    content = r.json()["choices"][0]["logprobs"]["content"]
    want = hf_greedy("llama", tuple(ids), 20)
    ref = hf_logprobs("llama", ids, want)
    assert len(content) >= 1
    for i, entry in enumerate(content[: len(want)]):
        assert abs(entry["logprob"] - float(ref[i, want[i]])) < 1e-3, (i, entry["logprob"])
        hf_top = ref[i].topk(2).values.tolist()
        assert 1 <= len(entry["top_logprobs"]) <= 2, i  # (fewer where two decode to the same text)
        assert all(min(abs(t["logprob"] - h) for h in hf_top) < 1e-3 for t in entry["top_logprobs"]), i


def test_aborted_request_fails_alone_and_nothing_leaks(server):
    base, proc, log = server
    rid = "ddtree-abort-me"
    body = {"input_ids": [7, 8, 9], "rid": rid, "stream": True, "sampling_params": {"temperature": 0, "max_new_tokens": 1500, "ignore_eos": True}}
    last = None
    with requests.post(base + "/generate", json=body, stream=True, timeout=120) as r:
        for i, line in enumerate(r.iter_lines()):
            if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
                continue
            last = json.loads(line[5:])
            if i == 0:
                requests.post(base + "/abort_request", json={"rid": rid}, timeout=30).raise_for_status()
    assert last is not None
    assert last["meta_info"]["finish_reason"]["type"] == "abort"
    assert len(last["output_ids"]) < 1500
    time.sleep(1.5)  # idle: the strict memory check runs and would raise on a leaked slot
    outs = _generate(base, PROMPTS[:2])
    for p, o in zip(PROMPTS[:2], outs):
        assert o["output_ids"] == hf_greedy("llama", tuple(p), N)
    assert proc.poll() is None
    assert "memory leak" not in log.read_text()


@pytest.mark.parametrize("bad", [[5, 6, 10**6], [-1, 5], [5, 2.5]], ids=["past-vocab", "negative", "float"])
def test_a_token_id_the_model_cannot_embed_is_a_400_and_the_server_keeps_serving(server, bad):
    """(sglang 0.5.17 sends such ids to the scheduler, whose embedding lookup raises and takes the
    server down.)"""
    base, proc, log = server
    r = requests.post(base + "/generate", json={"input_ids": bad, "sampling_params": {"max_new_tokens": 4}},
                      timeout=60)
    assert r.status_code == 400, r.text
    if all(isinstance(t, int) for t in bad):  # (a float fails sglang's request schema before this check)
        assert "is not a token id of this model" in r.json()["error"]["message"], r.text
    r = requests.post(base + "/v1/completions", json={"model": "tiny", "prompt": [bad], "max_tokens": 4}, timeout=60)
    assert r.status_code == 400, r.text
    outs = _generate(base, PROMPTS[:2])  # still serving, still exact
    for p, o in zip(PROMPTS[:2], outs):
        assert o["output_ids"] == hf_greedy("llama", tuple(p), N)
    assert proc.poll() is None
