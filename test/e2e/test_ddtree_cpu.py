"""``--speculative-algorithm DDTREE`` end to end on CPU through real sglang (tiny Llama).

Every DDTREE run is compared token for token with the same engine without speculation.
Acceptance really happens: the test-only oracle drafter (sglang_ddtree.testing.oracle_drafter)
proposes trees built from the target's own greedy continuation, with the true token as the
first child (whole paths accepted), as a later sibling (exactly one draft accepted per step)
or nowhere (none), and the per-step accept counts are asserted exactly. Random-drafter runs at
budgets 8 and 32 cover the untouched drafter. The scheduler's strict idle memory check
(``SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE``, sglang's own allocator free-count invariant)
raises on any leaked KV slot; each engine serves one more request after going idle to prove
it did not. The radix cache is on (sglang's default): follow-up prompts extended by part of
each decoded continuation reuse the KV that DDTREE committed during decode, and their outputs
equal no speculation.
"""

from __future__ import annotations

import json
import time

import pytest

from cpu_engine import PROMPTS, engine_kwargs, patched_env
from sglang_ddtree.testing import tiny_models
from sglang_ddtree.testing.oracle_drafter import write_oracle_file

pytestmark = pytest.mark.e2e

N = 33  # 1 token from prefill + 2 full DDTREE steps of 16 at budget >= 15
STRICT = {"SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": "1"}


def _greedy(max_new, **kw):
    return dict(temperature=0.0, max_new_tokens=max_new, **kw)


def _run(prompts_params, env=None, info_out=None, **spec):
    """Start an engine, run each (prompts, sampling_params[, generate kwargs]) batch, go idle,
    serve once more. ``info_out``: a list that receives the engine's server info right after
    the batches."""
    import sglang as sgl

    with patched_env(dict(STRICT, **(env or {}))):
        engine = sgl.Engine(**engine_kwargs(**spec))
    try:
        results = [engine.generate(input_ids=b[0], sampling_params=b[1], **(b[2] if len(b) > 2 else {}))
                   for b in prompts_params]
        if info_out is not None:
            info_out.append(engine.get_server_info())
        time.sleep(1.0)  # idle: the scheduler runs its memory invariant check
        after = engine.generate(input_ids=PROMPTS[:1], sampling_params=_greedy(8))
    finally:
        engine.shutdown()
    return results, after


def _ids(outs):
    return [o["output_ids"] for o in outs]


# Logprobs, per request: output logprobs with top-n, input logprobs from a start position, one
# request without; then every request with chosen token ids (sglang 0.5.17 itself, without
# speculation, dies on a prefill batch mixing requests with and without token_ids_logprob). The
# continuation is the "mixed" batch's (the oracle knows it).
LOGPROBS = dict(return_logprob=[True, True, False, True], top_logprobs_num=[3, 0, 0, 2],
                logprob_start_len=[0, 2, -1, -1])
TOKEN_IDS = dict(return_logprob=True, token_ids_logprob=[[5, 7], [11], [5], [3, 4, 9]])
# Structured output: a regex, a JSON schema and an EBNF grammar, on prompts of their own (the
# oracle drafter keys its continuations by prompt).
GRAMMAR_PROMPTS = [p + [7] for p in PROMPTS[:3]]
GRAMMAR = (GRAMMAR_PROMPTS, [
    _greedy(24, regex="(ab|cd)+e?"),
    _greedy(24, json_schema=json.dumps({"type": "object", "properties": {"n": {"type": "integer"}, "s": {
        "type": "string", "maxLength": 12}}, "required": ["n", "s"]})),
    _greedy(24, ebnf='root ::= ("x" | "yz" | " ")+'),
])
# Penalties, one kind per request, on prompts of their own (the oracle knows their penalised
# continuations), and the same prompts without.
PEN_PROMPTS = [p + [9] for p in PROMPTS]
PENALTIES = (PEN_PROMPTS, [_greedy(N, frequency_penalty=0.9), _greedy(N, presence_penalty=1.2),
                           _greedy(N, repetition_penalty=1.6), _greedy(N, min_new_tokens=25)])
PEN_PLAIN = (PEN_PROMPTS, _greedy(N))
SAMPLED_T = 0.7
# ignore_eos: the check is the logprob of whatever was sampled; a sample reaching EOS early (the
# seeded stream depends on how the scheduler batches the two requests) would shorten it, not fail it.
SAMPLED = (PROMPTS[:2], dict(temperature=SAMPLED_T, max_new_tokens=20, sampling_seed=7, ignore_eos=True),
           dict(return_logprob=True))


@pytest.fixture(scope="module")
def batches():
    return {"mixed": (PROMPTS, _greedy(N)), "lens": (PROMPTS, [_greedy(n) for n in (N, 7, 22, 1)]),
            "logprobs": (PROMPTS, _greedy(N), LOGPROBS), "token_ids": (PROMPTS, _greedy(N), TOKEN_IDS)}


# Follow-up prompts: each prompt extended by its first k decoded tokens, two cuts per prompt,
# each inside a DDTREE step's committed path (a step of the full-path oracle commits 16 tokens:
# output positions 0-15, then 16-31), so the radix cache hands the follow-up a prefix that ends
# part-way through KV slots that DDTREE's commit ordered.
FOLLOW_UP_CUTS = [(3, 19), (7, 23), (11, 27), (15, 31)]
FOLLOW_UP_NEW = 8


def _follow_ups(cont):
    prompts = [p + c[:k] for p, c, cuts in zip(PROMPTS, cont, FOLLOW_UP_CUTS) for k in cuts]
    return prompts, _greedy(FOLLOW_UP_NEW)


@pytest.fixture(scope="module")
def reference(batches, tmp_path_factory):
    """No-speculation outputs, plus stop-token / stop-string batches derived from them."""
    from transformers import AutoTokenizer

    base, after = _run([batches["mixed"], batches["lens"], batches["logprobs"], batches["token_ids"], GRAMMAR,
                        PENALTIES, PEN_PLAIN])
    cont = _ids(base[0])
    tok = AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))
    # Stops that land inside what DDTREE accepts in one step (positions 10 and 20).
    stop_ids = (PROMPTS, [_greedy(N, stop_token_ids=[c[10]]) for c in cont])
    stop_str = (PROMPTS, [_greedy(N, stop=[_clean_stop_word(tok, c)]) for c in cont])
    follow_ups = _follow_ups(cont)
    stops, _ = _run([stop_ids, stop_str, follow_ups])
    # The oracle knows the follow-ups' continuations too (a follow-up then takes one step).
    known = (list(zip(PROMPTS, cont)) + list(zip(follow_ups[0], _ids(stops[2])))
             + list(zip(GRAMMAR_PROMPTS, _ids(base[4]))) + list(zip(PEN_PROMPTS, _ids(base[5]))))
    oracle = tmp_path_factory.mktemp("oracle")
    files = {}
    for mode in ("first", "sibling", "nowhere"):
        f = oracle / f"{mode}.json"
        write_oracle_file(f, mode, known)
        files[mode] = str(f)
    return {
        "mixed": cont, "lens": _ids(base[1]), "after": _ids(after), "logprobs": base[2:4], "grammar": _ids(base[4]), "penalties": _ids(base[5]), "pen_plain": _ids(base[6]),
        "stop_ids": (stop_ids, _ids(stops[0])), "stop_str": (stop_str, _ids(stops[1])),
        "follow_ups": _ids(stops[2]),
        "oracle": files,
    }


def _clean_stop_word(tok, cont):
    """A plain ASCII word decoded from one token past the first step, whose first occurrence
    in the text is that token. Random byte-level tokens can decode to partial UTF-8, which
    makes "the same" stop string match at window-dependent places; plain words cannot."""
    for i in range(12, len(cont)):
        word = tok.decode([cont[i]]).strip()
        if len(word) >= 2 and word.isascii() and word.isalpha() and word not in tok.decode(cont[:i]):
            return word
    raise AssertionError("no clean stop word in the continuation; change the prompts")


def _ddtree(budget, topk=4):
    return dict(
        speculative_algorithm="DDTREE",
        speculative_draft_model_path=str(tiny_models.model_path("dflash-llama")),
        speculative_ddtree_budget=budget,
        speculative_ddtree_topk=topk,
    )


@pytest.fixture(scope="module")
def first_child(batches, reference):
    """One engine with the full-path oracle: the batches, then the follow-up prompts (sent
    after the batches finished, so the radix cache holds what DDTREE decoded)."""
    ref = reference
    info = []
    runs, after = _run(
        [batches["mixed"], batches["lens"], ref["stop_ids"][0], ref["stop_str"][0], batches["logprobs"],
         batches["token_ids"], _follow_ups(ref["mixed"])],
        env={"SGLANG_DDTREE_TEST_ORACLE": ref["oracle"]["first"]},
        # Every step re-checked by a sequential replay (--speculative-ddtree-oracle-rate 1):
        # full-depth paths, stops and finishing requests inside them; scratch KV freed (STRICT).
        info_out=info, speculative_ddtree_oracle_rate=1.0,
        **_ddtree(budget=15),
    )
    return runs, after, info


def test_oracle_first_child_accepts_full_paths_and_stays_lossless(first_child, reference):
    ref = reference
    runs, after, info = first_child
    dd = info[0]["internal_states"][0]["ddtree"]
    assert dd["oracle"]["steps"] == dd["steps"] and dd["oracle"]["skipped_steps"] == 0
    assert dd["oracle"]["checked_request_steps"] == dd["request_steps"] > 0
    assert dd["oracle"]["mismatched_request_steps"] == 0
    mixed, lens, stop_ids, stop_str = runs[:4]
    assert _ids(mixed) == ref["mixed"]
    for o in mixed:  # every step accepted all 15 drafts (a full-depth path)
        assert o["meta_info"]["spec_correct_drafts_histogram"] == [0] * 15 + [2]
    # Requests finishing mid-batch, max_new_tokens ending inside an accepted path.
    assert _ids(lens) == ref["lens"]
    # Stop token ids and stop strings inside an accepted path.
    assert _ids(stop_ids) == ref["stop_ids"][1]
    assert _ids(stop_str) == ref["stop_str"][1]
    for stopped in (ref["stop_ids"][1], ref["stop_str"][1]):
        assert all(len(a) < len(b) for a, b in zip(stopped, ref["mixed"]))
    assert _ids(after) == ref["after"]


LOGPROB_KEYS = ("output_token_logprobs", "output_top_logprobs", "output_token_ids_logprobs",
                "input_token_logprobs", "input_top_logprobs", "input_token_ids_logprobs")


def _logprob_entries(meta, key):
    """``[(logprob, token id), ...]`` of one logprob field (flattened over top-n / id lists)."""
    out = []
    for pos in meta.get(key) or []:
        for e in (pos if pos and isinstance(pos[0], (list, tuple)) else [pos]) if pos is not None else [None]:
            out.append(None if e is None else (e[0], e[1]))
    return out


def test_logprobs_equal_no_speculation(first_child, reference):
    """return_logprob, top_logprobs_num, token_ids_logprob and input logprobs from a start
    position, per request in one batch, one request without: DDTREE (full 16-token paths a
    step) returns what no speculation returns, token ids exactly, log-probabilities within
    1e-4 (fp32: one 16-position verify forward against 16 one-token forwards)."""
    runs = first_child[0]
    for batch, asked, got, want in zip(("logprobs", "token_ids"), (LOGPROBS, TOKEN_IDS), runs[4:6],
                                       reference["logprobs"]):
        assert _ids(got) == _ids(want) == reference["mixed"], batch
        flags = asked["return_logprob"]
        for i, (g, w) in enumerate(zip(got, want)):
            g, w = g["meta_info"], w["meta_info"]
            assert g["spec_correct_drafts_histogram"] == [0] * 15 + [2], (batch, i)
            if not (flags[i] if isinstance(flags, list) else flags):
                assert all(not g.get(k) for k in LOGPROB_KEYS), (batch, i)
                continue
            assert len(g["output_token_logprobs"]) == N
            for key in LOGPROB_KEYS:
                ge, we = _logprob_entries(g, key), _logprob_entries(w, key)
                assert [e and e[1] for e in ge] == [e and e[1] for e in we], (batch, i, key)
                worst = max([abs(a[0] - b[0]) for a, b in zip(ge, we) if a and a[0] is not None] or [0.0])
                assert worst < 1e-4, (batch, i, key, worst)
    # the checks see something: top-3 of request 0 at every output position, the asked ids
    lp, ids = runs[4], runs[5]
    assert all(len(pos) == 3 for pos in lp[0]["meta_info"]["output_top_logprobs"])
    assert len(lp[1]["meta_info"]["input_token_logprobs"]) == len(PROMPTS[1]) - 2
    for o, asked in zip(ids, TOKEN_IDS["token_ids_logprob"]):
        assert all([e[1] for e in pos] == asked for pos in o["meta_info"]["output_token_ids_logprobs"])


def test_radix_cache_reuses_kv_committed_by_ddtree(first_child, reference):
    """Follow-up prompts (each prompt extended by part of its decoded continuation) reuse the
    KV DDTREE committed during decode through the radix cache, and generate what no
    speculation generates. The radix cache stores ``req_to_token`` by position: a commit that
    puts the right KV slots in the wrong order (attention over all committed keys cannot see
    it) hands a follow-up the keys of other positions."""
    runs, _, _ = first_child
    follow = runs[-1]
    prompts, _ = _follow_ups(reference["mixed"])
    # The cache served every follow-up all of its prompt but the last token (which sglang
    # recomputes for the logits): the decoded part included.
    assert [o["meta_info"]["cached_tokens"] for o in follow] == [len(p) - 1 for p in prompts]
    differ = [i for i, (a, b) in enumerate(zip(_ids(follow), reference["follow_ups"])) if a != b]
    assert not differ, f"follow-ups {differ} of {len(prompts)} differ from no speculation"


def test_oracle_later_sibling_accepts_exactly_one_per_step(batches, reference, tmp_path):
    debug = tmp_path / "steps.jsonl"
    info = []
    runs, after = _run(
        [batches["mixed"]], env={"SGLANG_DDTREE_TEST_ORACLE": reference["oracle"]["sibling"]},
        info_out=info, speculative_ddtree_debug_jsonl=str(debug), speculative_ddtree_shadow_linear=True,
        **_ddtree(budget=16),
    )
    assert _ids(runs[0]) == reference["mixed"]
    for o in runs[0]:
        m = o["meta_info"]
        assert m["spec_correct_drafts_histogram"] == [0, 16]
        # Per request: 16 steps proposing the 16-node tree each, one accepted per step.
        assert m["spec_verify_ct"] == 16 and m["ddtree_tree_nodes"] == 16
        assert m["spec_num_proposed_drafts"] == 16 * 16 and m["spec_accept_rate"] == 16 / 256
    assert _ids(after) == reference["after"]
    # --speculative-ddtree-debug-jsonl: one line per step per request, consistent with output.
    lines = [json.loads(x) for x in debug.read_text().splitlines()]
    for o in runs[0]:
        mine = [x for x in lines if x["rid"] == o["meta_info"]["id"]]
        assert [x["step"] for x in mine] == sorted(x["step"] for x in mine)
        assert len(mine) == 16
        emitted = [t for x in mine for t in x["new_tokens"]]
        assert emitted[: len(o["output_ids"]) - 1] == o["output_ids"][1:]
        for x in mine:
            assert x["accept_len"] == 1 and len(x["tree"]) == 16
            node = x["tree"][x["accepted_nodes"][0]]
            assert node["parent"] == -1 and node["depth"] == 1  # a child of the root...
            assert x["accepted_nodes"][0] != 0  # ...but not the best one: a later sibling
            assert set(x["timings_ms"]) == {"draft", "topk", "tree", "verify", "accept", "commit", "context"}
            # --speculative-ddtree-shadow-linear: the chain's rank-0 draft at depth 1 is wrong
            # every step, so the DFLASH chain would have accepted nothing (exactly, not a bound).
            assert x["shadow_chain_accept_len"] == 0 and x["shadow_chain_censored"] is False
    dd = info[0]["internal_states"][0]["ddtree"]
    assert dd["accept_length_histogram"][:2] == [0, 64] and sum(dd["accept_length_histogram"]) == 64
    assert dd["shadow_chain"] == {"accept_length_histogram": [64] + [0] * 15, "avg_accept_length": 1.0,
                                  "censored_request_steps": 0}
    assert dd["avg_accept_length"] == 2.0


def test_oracle_nowhere_accepts_nothing(batches, reference):
    """No draft accepted; beside it, sampled requests asking for logprobs: each output logprob
    is the target's log-softmax at the request's temperature at its token (Hugging Face, teacher
    forcing over what DDTREE sampled), as sglang returns them without speculation."""
    from cpu_engine import hf_logprobs

    runs, after = _run(
        [batches["mixed"], SAMPLED], env={"SGLANG_DDTREE_TEST_ORACLE": reference["oracle"]["nowhere"]},
        **_ddtree(budget=8),
    )
    assert _ids(runs[0]) == reference["mixed"]
    for o in runs[0]:
        assert o["meta_info"]["spec_correct_drafts_histogram"] == [32]
    assert _ids(after) == reference["after"]
    for p, o in zip(SAMPLED[0], runs[1]):
        ids = o["output_ids"]
        got = [e[0] for e in o["meta_info"]["output_token_logprobs"]]
        assert [e[1] for e in o["meta_info"]["output_token_logprobs"]] == ids and len(ids) == 20
        ref = hf_logprobs("llama", p, ids, temperature=SAMPLED_T)
        worst = max(abs(g - float(ref[i, t])) for i, (g, t) in enumerate(zip(got, ids)))
        assert worst < 1e-3, worst


@pytest.mark.parametrize("budget", [32])  # (budget 8: the oracle-nowhere engine serves it)
def test_random_drafter_is_lossless(batches, reference, budget):
    # Sampled requests whose filters leave only the likeliest token (top-p 1e-6, min-p 1, and
    # both with top-k 3): they go through the sampling path of the verify and must still
    # produce the greedy continuation exactly.
    narrow = (PROMPTS, [dict(temperature=1.0, top_p=1e-6, max_new_tokens=N),
                        dict(temperature=0.7, min_p=1.0, max_new_tokens=N),
                        dict(temperature=1.3, top_k=3, top_p=1e-6, max_new_tokens=N),
                        dict(temperature=0.5, top_k=3, min_p=1.0, max_new_tokens=N)])
    runs, after = _run([batches["mixed"], batches["lens"], narrow], **_ddtree(budget=budget, topk=8))
    assert _ids(runs[0]) == reference["mixed"]
    assert _ids(runs[1]) == reference["lens"]
    assert _ids(runs[2]) == reference["mixed"]
    assert _ids(after) == reference["after"]
    # A step proposes the tree's `budget` nodes (sglang would count the verify width minus one:
    # 15 at budget 8, whose verify is one 16-wide draft block).
    for o in runs[0]:
        m = o["meta_info"]
        assert m["ddtree_tree_nodes"] == budget
        assert m["spec_num_proposed_drafts"] == m["spec_verify_ct"] * budget


@pytest.fixture(scope="module")
def oracle_features(reference):
    """One engine with the full-path oracle over the grammar and penalty batches' continuations."""
    runs, after = _run([GRAMMAR, PENALTIES], env={"SGLANG_DDTREE_TEST_ORACLE": reference["oracle"]["first"]},
                       **_ddtree(budget=15))
    return runs, after


def test_structured_output_equals_no_speculation(oracle_features, reference):
    """Grammar-constrained requests (regex, JSON schema, EBNF) served by DDTREE: the grammar's
    mask applied at every tree node, the grammar advanced along each path; with the full-path
    oracle (the tree holds the constrained continuation) whole paths are accepted, and the
    outputs equal no speculation token for token, the text matching its grammar."""
    import re

    runs, after = oracle_features
    assert _ids(runs[0]) == reference["grammar"]
    assert _ids(after) == reference["after"]
    assert max(o["meta_info"]["spec_accept_length"] for o in runs[0]) > 2.0, [o["meta_info"] for o in runs[0]]
    text = [o["text"] for o in runs[0]]
    assert re.fullmatch("(ab|cd)+e?", text[0]), text[0]
    if runs[0][1]["meta_info"]["finish_reason"]["type"] == "stop":  # a complete JSON object
        assert set(json.loads(text[1])) == {"n", "s"}, text[1]
    assert re.fullmatch("(x|yz| )+", text[2]), text[2]


def test_penalties_equal_no_speculation(oracle_features, reference):
    """Frequency, presence and repetition penalties and min_new_tokens, one kind per request in
    one batch: every tree node penalised from its own path (core/path_penalties.py); with the
    full-path oracle (the tree holds the penalised continuation) whole paths are accepted and the
    outputs equal no speculation token for token, where the penalties change the output."""
    runs, _ = oracle_features
    assert _ids(runs[1]) == reference["penalties"]
    for o in runs[1]:
        assert o["meta_info"]["spec_correct_drafts_histogram"] == [0] * 15 + [2], o["meta_info"]
    changed = [a != b for a, b in zip(reference["penalties"][:3], reference["pen_plain"][:3])]
    assert all(changed), changed  # each penalty changes the greedy continuation


def test_budget_auto_switches_per_step_and_stays_lossless(batches, reference, tmp_path):
    """--speculative-ddtree-budget auto with a step-cost table where the 32-node tree is cheapest
    alone and the chain cheapest at 4 requests: steps use both (and narrower verify windows
    than the reserved one), output stays identical, no KV slot leaks (STRICT)."""
    rows = [("DDTREE-32", 1, 1.0), ("DDTREE-32", 4, 100.0), ("DDTREE-8", 1, 5.0), ("DDTREE-8", 4, 5.0),
            ("DDTREE-chain", 1, 5.0), ("DDTREE-chain", 4, 1.0)]
    table = tmp_path / "step_cost.json"
    table.write_text(json.dumps({"rows": [dict(config=c, concurrency=n, ms_per_step=m) for c, n, m in rows]}))
    info = []
    spec = dict(_ddtree(budget="auto", topk=8), speculative_ddtree_step_cost=str(table))
    single = (PROMPTS[:1], _greedy(N))
    runs, after = _run([batches["mixed"], single, batches["lens"]], info_out=info, **spec)
    assert _ids(runs[0]) == reference["mixed"]
    assert _ids(runs[1]) == reference["mixed"][:1]
    assert _ids(runs[2]) == reference["lens"]
    assert _ids(after) == reference["after"]
    pol = info[0]["internal_states"][0]["ddtree"]["budget_policy"]
    assert pol["budgets"] == [8, 32] and pol["chain"] is True
    used = pol["steps_by_choice"]
    assert used.get("chain", 0) > 0 and used.get("32", 0) > 0, used
    for o in runs[0]:
        assert o["meta_info"]["ddtree_budget"] == "auto"


@pytest.mark.parametrize("page_size", [16, 64])
def test_pages_of_many_tokens_move_the_path_and_stay_lossless(batches, reference, page_size):
    """--page-size > 1: the accepted path's KV moves into place (no slot permutation). Full-depth
    oracle paths of 16 tokens cross page boundaries (prompts of 5, 3, 19 and 1 tokens), requests
    finish mid-page, the radix cache hands follow-ups whole pages committed that way; every output
    equals no speculation (at page size 1: the tiny Llama's greedy output does not depend on the
    page size, and a difference fails here either way), and no slot leaks (STRICT)."""
    follow = _follow_ups(reference["mixed"])
    work = [batches["mixed"], batches["lens"], follow]
    info = []
    runs, after = _run(work, env={"SGLANG_DDTREE_TEST_ORACLE": reference["oracle"]["first"]}, info_out=info,
                       page_size=page_size, **_ddtree(budget=15))
    want = [reference["mixed"], reference["lens"], reference["follow_ups"]]
    assert [_ids(r) for r in runs] == want
    assert _ids(after) == reference["after"]
    for o in runs[0]:  # every step accepted all 15 drafts: the moves really happened
        assert o["meta_info"]["spec_correct_drafts_histogram"] == [0] * 15 + [2]
    cached = [o["meta_info"]["cached_tokens"] for o in runs[2]]
    assert all(c % page_size == 0 for c in cached), cached  # the radix cache reuses whole pages
    if any(len(p) > page_size for p in follow[0]):  # some follow-up spans a whole committed page
        assert sum(cached) > 0, cached
