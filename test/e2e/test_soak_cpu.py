"""The soak driver (``benchmark/ddtree/soak.py``) on CPU: a DDTREE HTTP server and one without
speculation on the tiny Llama, 200 requests of every kind (at most 32 new tokens each) at 8 in
flight per server. The summary must show every kind sent, no failure or mismatch (greedy kinds
token for token: no near-tie allowance on CPU), every refusal refused, aborts and disconnects
that happened, whole paths accepted (the oracle drafter fed from the reference's outputs while
the soak runs), both servers alive and every pool free afterwards. (The tiny hybrid does not run
on sglang's CPU engine: its Qwen3.5 model module needs a kernel the CPU stand-in lacks; the GPU
call runs it.)

Beside it, the driver's own checks are shown to fail where they must: a leaked pool, a greedy
output or a log-probability that differs, a sampled answer one token short; and the oracle
drafter re-reads a rewritten file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))

import soak  # noqa: E402

REQUESTS = 200


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    out = tmp_path_factory.mktemp("soak") / "soak.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "soak.py"), "--model", "llama",
                        "--device", "cpu", "--requests", str(REQUESTS), "--concurrency", "8", "--seed", "3",
                        "--max-new-tokens", "32", "--serial-check", "3",
                        "--timeout-s", "240", "--out", str(out)],
                       capture_output=True, text=True, timeout=420)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    s = json.loads(out.read_text())
    s["_rc"], s["_stdout"] = r.returncode, r.stdout
    return s


def test_every_kind_ran_and_nothing_failed_or_mismatched(summary):
    s = summary
    assert s["_rc"] == 0 and s["passed"], s["_stdout"][-2000:]
    assert s["_stdout"].strip().splitlines()[-1].startswith("soak llama (cpu): PASS")
    assert s["complete"] and s["sent"]["ddtree"] == REQUESTS
    assert s["near_tie_tol"] == 0.0  # CPU: token for token
    assert s["failures"] == s["mismatches"] == s["near_tie_cuts"] == s["no_reference"] == 0, (
        s["failure_details"], s["mismatch_details"])
    for kind in soak.KINDS:
        k = s["kinds"][kind]
        assert k["planned"] >= 1 and k["sent"] == k["planned"] == k["ok"], (kind, k)
        if kind in soak.COMPARED:  # each compared with the reference server's answer
            assert k["ref_sent"] == k["planned"] and k["ref_failed"] == 0, (kind, k)
        else:
            assert k["ref_sent"] == 0, (kind, k)
    assert s["refusals"]["refused"] == s["refusals"]["sent"] == s["refusals"]["planned"] >= 1
    assert s["kinds"]["abort"]["outcomes"].get("aborted", 0) >= 1, s["kinds"]["abort"]
    assert s["kinds"]["disconnect"]["outcomes"].get("disconnected", 0) >= 1, s["kinds"]["disconnect"]


def test_the_serial_check_compares_both_servers_alone(summary):
    serial = summary["serial"]
    assert serial["items"] == 3 and serial["failed"] == 0, serial
    for name in ("ref_load_vs_serial", "ddtree_vs_ref"):  # CPU: token for token
        assert serial[name]["equal"] == 3 and serial[name]["mismatch"] == 0, (name, serial[name])
    assert "; serial (3, equal/near-tie/mismatch): ref_load_vs_serial 3/0/0, ddtree_vs_ref 3/0/0" in summary["_stdout"]


def test_the_oracle_made_ddtree_accept_whole_paths(summary):
    dd = summary["accept"]["ddtree"]
    hist = dd["accept_length_histogram"]
    assert len(hist) == 16 and hist[15] > 0, dd  # budget 16: full 15-draft paths accepted
    assert sum(hist) == dd["request_steps"] > 0


def test_no_slot_leaked_and_both_servers_lived(summary):
    for name, c in summary["servers"].items():
        assert c["ok"] and c["alive"] and c["idle"] and c["health"] == 200, (name, c)
        assert c["leaks"] == [] and c["log_errors"] == [], (name, c)
        counts = c["pool_counts"]
        for pool in ("kv", "req"):
            p = counts[pool]
            assert p["available"] + p["evictable"] == p["total"] > 0, (name, pool, p)
        assert counts["req"]["available"] == counts["req"]["total"]
        assert counts["sglang_check"]["leak"] is False


def test_leaked_pools_names_every_pool_with_missing_slots():
    from sglang_ddtree.testing.pool_counts import leaked_pools

    clean = {"idle": True, "kv": {"available": 90, "evictable": 10, "total": 100},
             "req": {"available": 8, "evictable": 0, "total": 8},
             "mamba": {"available": 8, "evictable": 0, "total": 8}, "sglang_check": {"leak": False, "messages": []}}
    assert leaked_pools(clean) == []
    leaky = json.loads(json.dumps(clean))
    leaky["kv"]["available"] = 89
    leaky["mamba"]["available"] = 7
    assert leaked_pools(leaky) == ["kv: 89+10/100", "mamba: 7+0/8"]
    flagged = dict(clean, sglang_check={"leak": True, "messages": ["[full] total=100, available=89"]})
    assert leaked_pools(flagged) == ["sglang's invariant check: [full] total=100, available=89"]


def _item(kind, **body):
    return soak.Item(0, kind, "/generate", body, [5, 6, 7])


def test_check_fails_on_a_different_token_a_logprob_beyond_tolerance_and_a_short_sample():
    greedy = _item("greedy", sampling_params={"temperature": 0.0, "max_new_tokens": 4})
    ref = {"output_ids": [9, 8, 7, 6], "meta": {}}
    assert soak.check(greedy, {"output_ids": [9, 8, 7, 6], "meta": {}}, ref, 0.0, 1e-3, None)[0] == "ok"
    status, detail = soak.check(greedy, {"output_ids": [9, 8, 5, 6], "meta": {}}, ref, 0.0, 1e-3, None)
    assert status == "mismatch" and detail["pos"] == 2
    assert soak.check(greedy, {"output_ids": [9, 8, 7], "meta": {}}, ref, 0.0, 1e-3, None)[0] == "mismatch"
    # A near-tie of the reference's top two (gap 0.01 <= 0.05) where the other of the two was taken.
    top = [[[-0.5, t, None], [-0.51, 5, None]] for t in ref["output_ids"]]
    ref_lp = {"output_ids": ref["output_ids"], "meta": {"output_top_logprobs": top}}
    assert soak.check(greedy, {"output_ids": [9, 8, 5, 1], "meta": {}}, ref_lp, 0.05, 0.1, None)[0] == "near_tie"
    assert soak.check(greedy, {"output_ids": [9, 8, 4, 1], "meta": {}}, ref_lp, 0.05, 0.1, None)[0] == "mismatch"

    lp = _item("logprobs", sampling_params={"temperature": 0.0, "max_new_tokens": 2}, return_logprob=True,
               top_logprobs_num=1)
    want = {"output_ids": [9, 8], "meta": {"output_token_logprobs": [[-0.1, 9, None], [-0.2, 8, None]],
                                           "output_top_logprobs": [[[-0.1, 9, None]], [[-0.2, 8, None]]]}}
    off = json.loads(json.dumps(want))
    assert soak.check(lp, off, want, 0.0, 1e-3, None)[0] == "ok"
    off["meta"]["output_token_logprobs"][1][0] = -0.25
    status, detail = soak.check(lp, off, want, 0.0, 1e-3, None)
    assert status == "mismatch" and detail["key"] == "output_token_logprobs", detail

    # The reference asked for its top-2 (near-tie cuts on a GPU), the DDTREE request for no top
    # log-probs: nothing to compare there.
    lp0 = _item("logprobs", sampling_params={"temperature": 0.0, "max_new_tokens": 2}, return_logprob=True,
                top_logprobs_num=0)
    ref_top = {"output_ids": [9, 8], "meta": dict(want["meta"], output_top_logprobs=[
        [[-0.1, 9, None], [-3.0, 1, None]], [[-0.2, 8, None], [-3.0, 1, None]]])}
    got_no_top = {"output_ids": [9, 8], "meta": {"output_token_logprobs": want["meta"]["output_token_logprobs"]}}
    assert soak.check(lp0, got_no_top, ref_top, 0.05, 0.1, None)[0] == "ok"

    chat = soak.Item(0, "chat", "/v1/chat/completions", {"messages": [], "max_tokens": 3})
    chat_ref = {"choices": [{"token_ids": [4, 5, 6]}]}
    assert soak.check(chat, {"choices": [{"token_ids": [4, 5, 6]}]}, chat_ref, 0.0, 1e-3, None)[0] == "ok"
    assert soak.check(chat, {"choices": [{"token_ids": [4, 5]}]}, chat_ref, 0.0, 1e-3, None)[0] == "mismatch"
    # A chat near-tie: the reference's top-2 (by token text) 0.02 apart and the other one taken.
    content = [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t, "logprob": -0.5},
                                                             {"token": "x", "logprob": -0.52}]} for t in "abc"]
    chat_ref_lp = {"choices": [{"token_ids": [4, 5, 6], "logprobs": {"content": content}}]}

    class Tok:  # ids 10 and 11 are lone bytes: both decode to U+FFFD
        TEXT = {4: "a", 5: "b", 6: "c", 7: "x", 8: "y", 10: "\ufffd", 11: "\ufffd"}

        def __len__(self):
            return 12

        def decode(self, ids):
            return self.TEXT.get(ids[0], f"<{ids[0]}>")

    tok = Tok()
    assert soak.check(chat, {"choices": [{"token_ids": [4, 7, 1]}]}, chat_ref_lp, 0.05, 0.1, lambda: tok)[0] == "near_tie"
    assert soak.check(chat, {"choices": [{"token_ids": [4, 8, 1]}]}, chat_ref_lp, 0.05, 0.1, lambda: tok)[0] == "mismatch"
    # A token whose text several ids share is not matched by text: the reference re-scores both
    # ids after the prompt and the common prefix; without that it is a mismatch.
    content_b = [dict(c, top_logprobs=[{"token": c["token"], "logprob": -0.5}, {"token": "\ufffd", "logprob": -0.51}])
                 for c in content]
    chat_ref_b = {"choices": [{"token_ids": [4, 5, 6], "logprobs": {"content": content_b}, "prompt_token_ids": [1, 2]}]}
    asked = []

    def rescore(gap):
        def f(ids, want):
            asked.append((ids, want))
            return 5, {5: -0.5, 10: -0.5 - gap}
        return f

    byte = {"choices": [{"token_ids": [4, 10, 1]}]}
    assert soak.check(chat, byte, chat_ref_b, 0.05, 0.1, lambda: tok)[0] == "mismatch"  # (no re-scoring)
    assert soak.check(chat, byte, chat_ref_b, 0.05, 0.1, lambda: tok, rescore(0.02))[0] == "near_tie"
    assert asked == [([1, 2, 4], [5, 10])]
    status, detail = soak.check(chat, byte, chat_ref_b, 0.05, 0.1, lambda: tok, rescore(0.3))
    assert status == "mismatch" and abs(detail["gap"] - 0.3) < 1e-9, detail

    # A third-ranked token within the tolerance is a near-tie too; one beyond it is not.
    top5 = [[[-0.5, t, None], [-0.51, 5, None], [-0.53, 4, None], [-0.9, 3, None]] for t in ref["output_ids"]]
    ref5 = {"output_ids": ref["output_ids"], "meta": {"output_top_logprobs": top5}}
    assert soak.check(greedy, {"output_ids": [9, 8, 4, 1], "meta": {}}, ref5, 0.05, 0.1, None)[0] == "near_tie"
    assert soak.check(greedy, {"output_ids": [9, 8, 3, 1], "meta": {}}, ref5, 0.05, 0.1, None)[0] == "mismatch"

    # Top-n lists: entries tied within the tolerance may swap, also across the list's cut (the
    # reference asked for more); a value off at its rank or an untied stranger is a mismatch.
    want5 = [(-0.1, 9), (-0.30, 1), (-0.31, 2), (-0.9, 3)]
    assert soak._same_top([(-0.1, 9), (-0.31, 2)], want5, 0.05) is None  # 2 and 1 swap
    assert soak._same_top([(-0.1, 9), (-0.3, 1), (-0.9, 7)], want5[:3], 0.05) is not None  # 7: no tie at the cut
    assert soak._same_top([(-0.1, 9), (-0.3, 1), (-0.31, 7)], want5[:3], 0.05) is None  # 7 ties the cut (-0.31)
    assert soak._same_top([(-0.1, 9), (-0.5, 1)], want5, 0.05) is not None  # value off at rank 2
    assert soak._same_top([(-0.1, 9), (-0.3, 3)], want5, 0.05) is not None  # 3 is listed at -0.9
    assert soak._same_top([(-0.1, 9)] * 3, want5[:2], 0.05) is not None  # the reference listed fewer

    sampled = _item("sampled", sampling_params={"temperature": 1.0, "max_new_tokens": 3, "ignore_eos": True})
    ok = {"output_ids": [1, 2, 3], "meta": {"finish_reason": {"type": "length"}}}
    assert soak.check(sampled, ok, None, 0.0, 1e-3, None)[0] == "ok"
    short = {"output_ids": [1, 2], "meta": {"finish_reason": {"type": "stop"}}}
    assert soak.check(sampled, short, None, 0.0, 1e-3, None)[0] == "failed"


def test_plan_is_deterministic_and_holds_every_kind():
    a, b = soak.plan(40, 7, 512), soak.plan(40, 7, 512)
    assert [(x.kind, x.path, x.body) for x in a] == [(x.kind, x.path, x.body) for x in b]
    assert {x.kind for x in a} == set(soak.KINDS)
    prompts = [tuple(x.prompt) for x in a if x.prompt is not None and x.kind != "refusal"]
    assert len(prompts) == len(set(prompts))  # the oracle drafter keys continuations by prompt
    with pytest.raises(ValueError):
        soak.plan(len(soak.KINDS) - 1, 0, 512)


def test_oracle_drafter_rereads_a_rewritten_file(tmp_path):
    import os

    from sglang_ddtree.testing.oracle_drafter import OracleDrafter, write_oracle_file

    class Req:
        origin_input_ids = [5, 6]
        output_ids = [40]

    f = tmp_path / "oracle.json"
    write_oracle_file(f, "first", {})
    o = OracleDrafter(str(f))
    _, ids = o.topk([Req()], 3, 4, 512, "cpu")
    assert 41 not in ids[0, :, 0].tolist()
    write_oracle_file(f, "first", [((5, 6), [40, 41, 42, 43])])
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # (a clock too coarse to tell the writes apart)
    _, ids = o.topk([Req()], 3, 4, 512, "cpu")
    assert ids[0, :, 0].tolist() == [41, 42, 43]  # the true continuation at rank 0, depth by depth
    assert 41 not in ids[0, 0, 1:].tolist()


def test_float32_on_cuda_serves_norms_and_rope_natively():
    """sglang 0.5.17's norm and rope kernels have no float32 CUDA version: both servers of a
    float32 soak on CUDA get the test plugin's native route, for either model, and the hybrid's
    conv state pool in float32 (sglang's default is bf16 whatever the model dtype), and Triton's
    float32 dots in IEEE float32 (not its TF32 default); nothing else does."""
    want = {"SGLANG_DDTREE_TEST_FP32_NORMS": "1", "TRITON_F32_DEFAULT": "ieee"}
    assert soak.dtype_env("qwen35", "cuda", "float32") == dict(want, SGLANG_MAMBA_CONV_DTYPE="float32")
    assert soak.dtype_env("llama", "cuda", "float32") == want
    assert soak.dtype_env("qwen35", "cuda", "bfloat16") == {}
    assert soak.dtype_env("qwen35", "cpu", "float32") == {}
