"""GPU smoke cases: one sglang Engine per case, each in its own process.

Why processes: sglang's ``Engine.shutdown`` kills sibling processes of the scheduler tree, and a
scheduler that dies sends SIGQUIT to its parent, so several engines in one pytest process can
take the test runner down silently. Each case here runs in a child (``python gpu_cases.py run
NAME --out DIR``) that writes ``DIR/NAME.json`` (outputs, meta_info, timings, CUDA-graph
captures seen in the log) and ``DIR/NAME.log``; ``run_all`` runs the plain cases first (the
references, and the oracle drafter's continuations) and then the rest, several at once (tiny
models: one H200 holds them all).

Every engine: bf16, triton attention, pytorch sampling, decode/verify CUDA graphs on
(``cuda_graph_max_bs_decode`` 4), prefill CUDA graph off (captured prefill graphs are not what
this suite checks and cost up to 80 s of start-up per engine).

    python test/e2e/gpu_cases.py all --out /tmp/gpu-smoke [--parallel 4] [--only a,b]
    python test/e2e/gpu_cases.py check --out /tmp/gpu-smoke [--suite smoke]   # verdicts from the records alone
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cpu_engine import PROMPTS, patched_env  # noqa: E402

# Plain runs generate REF_NEW tokens per prompt; speculative runs ask for MIXED_NEW (requests
# finish mid-batch) and must equal the plain prefix of that length.
REF_NEW = 40
MIXED_NEW = [40, 17, 33, 9]
# The oracle case: every step accepts a full 15-deep path, so 1 + 2 * 16 tokens take 2 steps.
ORACLE_NEW = 33
# Radix-cache reruns (``radix_rerun``): prompts extended by the plain output's first RERUN_AT
# tokens, with a tracking interval that the first round crosses in decode steps. Their reference
# is the same rerun on a plain engine without a prefix cache (``RERUN_REF``): a prefill of those
# tokens is not bit-equal to the decode steps that produced them (on the H200 the tiny hybrid
# target's prefilled continuation left the decoded one at the first token, top-2 gap 0.23).
RERUN_AT = 20
TRACK_INTERVAL = 16
# Structured output (``grammar`` cases): one grammar per prompt, against a plain run with the same
# grammars (its own reference, ``ref``).
GRAMMARS = [dict(regex="(ab|cd)+e?"),
            dict(json_schema=json.dumps({"type": "object", "properties": {"n": {"type": "integer"}, "s": {
                "type": "string", "maxLength": 12}}, "required": ["n", "s"]})),
            dict(ebnf='root ::= ("x" | "yz" | " ")+'),
            dict(regex="[0-9]{2,30}")]
# Penalties (``penalties`` cases): one kind per prompt, likewise against a plain run with them.
PENALTIES = [dict(frequency_penalty=0.9), dict(presence_penalty=1.2), dict(repetition_penalty=1.6),
             dict(min_new_tokens=25)]
PER_PROMPT = {"grammar": GRAMMARS, "penalties": PENALTIES}


def per_prompt_options(checks: dict) -> Optional[list]:
    """The sampling options a case adds to each prompt (its ``grammar`` / ``penalties`` check),
    or None. Such runs may end early (a grammar's end, EOS) and are compared with a plain run of
    the same options."""
    picked = [v for k, v in PER_PROMPT.items() if checks.get(k)]
    assert len(picked) <= 1, checks
    return picked[0] if picked else None
# What the H200 showed for every rerun on the tiny hybrid: with its radix-cache
# strategy unresolved (no tracking; see the radix cases below), reruns from cached prefixes leave the cache-less rerun, with and without
# speculation (sglang's DFLASH too), and no decode step is cached at a tracking boundary.
RERUN_KNOWN = ("tiny hybrid: reruns from cached prefixes differ from the cache-less rerun in sglang 0.5.17 with "
               "and without speculation (results/ARCHIVE.md); this case matched its sglang control")
# On the H200 (RESULTS 1): the head-dim-64 tiny hybrid's speculative runs leave its plain run at
# top-2 gaps up to 0.2 nats in bf16 — sglang's own DFLASH on flashinfer, and DDTREE on
# flashinfer and triton, wy and snapshot, graph and eager verify, all with the same tokens.
HD64_HYBRID_SPEC = ("sglang's own DFLASH leaves plain decoding on the head-dim-64 tiny hybrid (bf16 top-2 gaps up to "
                    "0.2 nats); DDTREE's cases are held to it token for token (spec_like)")
# Test-only: sglang's extra-buffer strategy (decode-time state tracking) for the tiny text-only
# hybrid target (testing/extra_buffer_arch.py), so the tracking paths run on a GPU.
XB_ENV = {"SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS": "Qwen3_5ForCausalLM"}


def reference(name: str) -> str:
    """The plain case a case is compared with: its ``ref`` check, else ``plain-<model>``."""
    return CASES[name][2].get("ref") or f"plain-{CASES[name][0]}"


def rerun_reference(model: str) -> str:
    """The case whose cache-less rerun is the reference of ``model``'s radix reruns."""
    return f"nocache-{model}-rerun"


def _path(name: str) -> str:
    """The tiny model of a case's model key: ``NAME`` or ``NAME@BACKEND`` (an attention backend
    other than triton, for target and drafter alike; the key also names the plain reference)."""
    from sglang_ddtree.testing import tiny_models

    return str(tiny_models.model_path(name.split("@")[0]))


def _backend(model: str) -> str:
    return model.split("@")[1] if "@" in model else "triton"


def _dflash(model):
    return dict(speculative_algorithm="DFLASH", speculative_draft_model_path=_path(f"dflash-{model}"))


def _standalone(draft):
    return dict(speculative_algorithm="STANDALONE", speculative_draft_model_path=_path(draft),
                speculative_num_steps=3, speculative_eagle_topk=2, speculative_num_draft_tokens=4)


def _ddtree(budget, model="llama", topk=4, **extra):
    # Hybrid cases name their GDN mode: unnamed (no "-wy") is sglang's per-node path, whatever
    # the engine's default (wy); None leaves the default to the engine.
    if model.split("@")[0] == "qwen35":
        extra.setdefault("speculative_ddtree_gdn_mode", "snapshot")
    extra = {k: v for k, v in extra.items() if v is not None}
    return dict(speculative_algorithm="DDTREE", speculative_draft_model_path=_path(f"dflash-{model}"),
                speculative_ddtree_budget=budget, speculative_ddtree_topk=topk, **extra)


# --speculative-ddtree-budget auto (the CPU e2e test's table): the 32-node tree is cheapest for
# one request, the chain from two up, so the mixed batch (4 requests finishing one by one) steps
# through both verify widths (33 and 16).
def _wy(model: str) -> dict:
    return dict(speculative_ddtree_gdn_mode="wy", disable_radix_cache=True) if model.startswith("qwen35") else {}


AUTO_ROWS = [("DDTREE-32", 1, 1.0), ("DDTREE-32", 4, 100.0), ("DDTREE-8", 1, 5.0), ("DDTREE-8", 4, 5.0),
             ("DDTREE-chain", 1, 5.0), ("DDTREE-chain", 4, 1.0)]


# The same with budget 32 measured at one request only: its width-33 graphs are captured for one
# request (engine/verify_widths.py caps each width at what the policy can choose it at), and the
# policy picks it only when one request is left.
AUTO_ROWS_CAPPED = [r for r in AUTO_ROWS if not (r[0] == "DDTREE-32" and r[1] > 1)]


def _like_dflash(model: str, backend: str) -> dict:
    """The ``spec_like`` check of a DDTREE case on the head-dim-64 hybrid (HD64_HYBRID_SPEC)."""
    return {"spec_like": f"dflash-{model}@{backend}"} if model == "qwen3564" else {}


def _auto(model, rows=AUTO_ROWS, **extra):
    import tempfile

    fd, table = tempfile.mkstemp(prefix="ddtree-step-cost-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"rows": [dict(config=c, concurrency=n, ms_per_step=m) for c, n, m in rows]}, f)
    return _ddtree("auto", model, topk=4, speculative_ddtree_step_cost=table, **extra)


# name -> (target model, speculative kwargs factory, what the test asserts beyond equality)
CASES = {
    "plain-llama": ("llama", dict, {}),
    "plain-qwen35": ("qwen35", dict, {}),
    "dflash-llama": ("llama", lambda: _dflash("llama"), {}),
    "dflash-qwen35": ("qwen35", lambda: _dflash("qwen35"), {}),
    # The target drafts for itself: acceptance really happens (accept length > 1).
    "standalone-topk2-llama": ("llama", lambda: _standalone("llama"), {"accepts": True}),
    # (A hybrid STANDALONE drafter fails inside upstream's draft forward in 0.5.17, RESULTS.md;
    # the tiny Llama shares the vocabulary and drafts for the hybrid target instead.)
    "standalone-topk2-qwen35": ("qwen35", lambda: _standalone("llama"), {}),
    # DDTREE, overlap scheduling on unless named; the hybrid target through sglang's per-node
    # state path (--speculative-ddtree-gdn-mode snapshot, the default).
    "ddtree8-llama": ("llama", lambda: _ddtree(8), {}),
    "ddtree32-llama": ("llama", lambda: _ddtree(32), {}),
    "ddtree128-llama": ("llama", lambda: _ddtree(128), {}),
    "ddtree32-llama-nooverlap": ("llama", lambda: _ddtree(32, disable_overlap_schedule=True), {}),
    # Bushy trees on the hybrid target (the session-2 mismatch: sglang's overlapping conv-window
    # layout, kept dense for DDTREE by compat/conv_windows.py).
    "ddtree8-qwen35": ("qwen35", lambda: _ddtree(8, "qwen35"), {}),
    "ddtree32-qwen35": ("qwen35", lambda: _ddtree(32, "qwen35"), {}),
    "ddtree128-qwen35": ("qwen35", lambda: _ddtree(128, "qwen35"), {}),
    "ddtree8-qwen35-nooverlap": ("qwen35", lambda: _ddtree(8, "qwen35", disable_overlap_schedule=True), {}),
    # --speculative-ddtree-gdn-mode wy: the snapshot-free tree kernels (engine/tree_gdn.py); no
    # prefix-cache state tracking yet, so without the radix cache.
    "ddtree8-qwen35-wy": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                    disable_radix_cache=True), {}),
    "ddtree32-qwen35-wy": ("qwen35", lambda: _ddtree(32, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                     disable_radix_cache=True), {}),
    # 65-node trees: twostage with 64-node chunks, the pair products inside its prep.
    "ddtree64-qwen35-wy": ("qwen35", lambda: _ddtree(64, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                     disable_radix_cache=True), {}),
    # Every verify a padded graph replay: graphs for batch size 8 only, at most 4 requests, so
    # 4+ rows a step carry sglang's PAD_SLOT_ID (-1) — what crashed the 27B at 64 requests before
    # the verify kernels read that slot as slot 0.
    "ddtree32-qwen35-wy-padded": ("qwen35", lambda: _ddtree(32, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                            disable_radix_cache=True, cuda_graph_max_bs_decode=8,
                                                            cuda_graph_bs_decode=[8]), {}),
    # Diagnostics of wy mode: sglang's per-node verify beside ours on the same inputs (the log
    # has the largest output difference per step); budget 128 with synchronous launches.
    "ddtree8-qwen35-wy-check": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                          speculative_ddtree_eager_verify=True,
                                                          disable_radix_cache=True),
                                {"debug": True, "env": {"SGLANG_DDTREE_WY_CHECK": "1"}}),
    "ddtree15-qwen35-wy-check-oracle-first": ("qwen35", lambda: _ddtree(15, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                          speculative_ddtree_eager_verify=True,
                                                                        disable_radix_cache=True),
                                              {"oracle": "first", "env": {"SGLANG_DDTREE_WY_CHECK": "1"}}),
    # wy with overlap scheduling off, and one request at a time (every wy case chose
    # the same wrong tokens; these separate scheduling and batching from the kernels' math).
    "ddtree8-qwen35-wy-nooverlap": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                              disable_radix_cache=True, disable_overlap_schedule=True), {}),
    "ddtree8-qwen35-wy-serial": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                           disable_radix_cache=True), {"serial": True}),
    # CUDA-graph tree verify on the hybrid through sglang's per-node path at the budgets.
    "ddtree8-qwen35-graphs": ("qwen35", lambda: _ddtree(8, "qwen35"), {
        "graphs": True}),
    "ddtree32-qwen35-graphs": ("qwen35", lambda: _ddtree(32, "qwen35"), {
        "graphs": True}),
    "ddtree128-qwen35-graphs": ("qwen35", lambda: _ddtree(128, "qwen35"), {
        "graphs": True}),
    "ddtree32-llama-graphs": ("llama", lambda: _ddtree(32), {"graphs": True}),
    "ddtree128-qwen35-wy-sync": ("qwen35", lambda: _ddtree(128, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                           disable_radix_cache=True),
                                 {"env": {"CUDA_LAUNCH_BLOCKING": "1"}}),
    "ddtree128-qwen35-wy": ("qwen35", lambda: _ddtree(128, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                      disable_radix_cache=True), {}),
    # --page-size 16: full-depth oracle paths (16 tokens) cross pages; the path's KV moves into
    # place (core/commit_plan.py).
    "ddtree15-llama-oracle-first-page16": ("llama", lambda: _ddtree(15, page_size=16), {"oracle": "first"}),
    "ddtree15-qwen35-wy-oracle-first-page16": ("qwen35", lambda: _ddtree(15, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                                         disable_radix_cache=True, page_size=16),
                                               {"oracle": "first"}),
    "ddtree15-qwen35-wy-oracle-first": ("qwen35", lambda: _ddtree(15, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                                  disable_radix_cache=True),
                                        {"oracle": "first", "logprobs": True}),
    "ddtree16-qwen35-wy-oracle-sibling": ("qwen35", lambda: _ddtree(16, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                                    disable_radix_cache=True), {"oracle": "sibling"}),
    # Variants that located that mismatch: no CUDA graphs, a padded chain (budget 8,
    # topk 1: 9 tree nodes in a 16-wide verify), topk 2, no radix cache, one request at a time;
    # the first three write the per-step debug JSONL.
    "ddtree8-qwen35-eager": ("qwen35", lambda: _ddtree(8, "qwen35", disable_cuda_graph=True), {"debug": True, "eager": True}),
    "ddtree8-qwen35-chainpad": ("qwen35", lambda: _ddtree(8, "qwen35", topk=1), {"debug": True}),
    "ddtree8-qwen35-topk2": ("qwen35", lambda: _ddtree(8, "qwen35", topk=2), {"debug": True}),
    "ddtree8-qwen35-noradix": ("qwen35", lambda: _ddtree(8, "qwen35", disable_radix_cache=True,
                                                           speculative_ddtree_gdn_mode="snapshot"), {}),
    "ddtree8-qwen35-serial": ("qwen35", lambda: _ddtree(8, "qwen35"), {"serial": True}),
    # topk 1, budget 15: the tree is DFLASH's 16-position chain (isolates tree-specific issues).
    "ddtree15-qwen35-chain": ("qwen35", lambda: _ddtree(15, "qwen35", topk=1), {}),
    # Oracle drafter (testing/oracle_drafter.py): acceptance really happens, at known places.
    # On the hybrid target these check the linear-attention state commit: a full-depth path,
    # and a non-first sibling whose state is not the chain's.
    # Structured output: the plain run with one grammar per prompt, and DDTREE with the full-path
    # oracle over that run's continuations (the grammar's mask at every tree node).
    "plain-llama-grammar": ("llama", dict, {"grammar": True}),
    # Without overlap scheduling: under overlap, sglang 0.5.17 penalises each decode step with
    # the output one token late (ScheduleBatch.cumulate_penalty_output_tokens reads
    # req.output_ids[-1] before the previous step's token is appended; the first decode step
    # counts the prompt's last token), so its penalised greedy output is not the penalties'
    # definition. DDTREE applies them exactly, overlap or not: the reference is the exact one.
    "plain-llama-penalties": ("llama", lambda: dict(disable_overlap_schedule=True), {"penalties": True}),
    "ddtree15-llama-oracle-first-penalties": ("llama", lambda: _ddtree(15), {"oracle": "first", "penalties": True,
                                                                             "ref": "plain-llama-penalties"}),
    "ddtree15-llama-oracle-first-grammar": ("llama", lambda: _ddtree(15), {"oracle": "first", "grammar": True,
                                                                           "ref": "plain-llama-grammar"}),
    # (also asking for logprobs: top-2 at every position, against the plain run's)
    "ddtree15-llama-oracle-first": ("llama", lambda: _ddtree(15), {"oracle": "first", "logprobs": True}),
    "ddtree16-llama-oracle-sibling": ("llama", lambda: _ddtree(16), {"oracle": "sibling"}),
    # The tree attention through sglang's own custom-mask kernel instead of the split-KV one
    # (the default on the triton backend, every other DDTREE case).
    "ddtree16-llama-oracle-sibling-backend-attn": ("llama", lambda: _ddtree(
        16, speculative_ddtree_tree_attention="backend"), {"oracle": "sibling"}),
    # CUDA-graph tree verify (engine/verify_graph.py): replays must happen and
    # stay lossless with accepted later siblings; the control captures without the mask (as
    # sglang does for DFLASH) and must NOT stay lossless, which shows the mask is applied.
    "ddtree16-llama-oracle-sibling-graphs": ("llama", lambda: _ddtree(16), {
        "oracle": "sibling", "graphs": True}),
    "ddtree16-llama-oracle-sibling-graphs-nomask": ("llama", lambda: _ddtree(16), {
        "oracle": "sibling", "expect_mismatch": True,
        "env": {"SGLANG_DDTREE_TEST_NOMASK_CONTROL": "1"}}),
    # The same preview on the hybrid target: sglang's per-node kernels with its static tree-link
    # buffers (snapshot), and our tree kernels with static tree buffers (wy); and on the Llama at
    # the other budgets (before the preview becomes the default).
    "ddtree16-qwen35-oracle-sibling-graphs": ("qwen35", lambda: _ddtree(16, "qwen35"), {
        "oracle": "sibling", "graphs": True}),
    "ddtree16-qwen35-wy-oracle-sibling-graphs": ("qwen35", lambda: _ddtree(16, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                                           disable_radix_cache=True), {
        "oracle": "sibling", "graphs": True}),
    "ddtree32-qwen35-wy-graphs": ("qwen35", lambda: _ddtree(32, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                            disable_radix_cache=True), {
        "graphs": True}),
    "ddtree8-llama-graphs": ("llama", lambda: _ddtree(8), {"graphs": True}),
    "ddtree128-llama-graphs": ("llama", lambda: _ddtree(128), {
        "graphs": True}),
    "ddtree15-qwen35-oracle-first": ("qwen35", lambda: _ddtree(15, "qwen35"), {"oracle": "first"}),
    "ddtree16-qwen35-oracle-sibling": ("qwen35", lambda: _ddtree(16, "qwen35"), {"oracle": "sibling"}),
    # Budget auto with the graph verify: every step replays a graph of its own width
    # (engine/verify_widths.py), on both targets and both GDN modes.
    "ddtree-auto-llama": ("llama", lambda: _auto("llama"), {"auto": True}),
    # Attention backends other than triton (issue 30), head dim 64 (flashinfer refuses 16): the
    # tree mask through flashinfer's custom-mask prefill; each against the plain engine on the
    # same backend. Budgets 16 (one page of 17), 64 and auto; the hybrid in wy mode, held to
    # sglang's DFLASH where that leaves plain decoding (HD64_HYBRID_SPEC).
    **{f"{kind}-{m}@{be}": (f"{m}@{be}", spec, {**checks, **_like_dflash(m, be)} if kind != "plain" else checks)
       for be in ("flashinfer",)
       for m in ("llama64", "qwen3564")
       for kind, spec, checks in (
           ("plain", dict, {}),
           ("ddtree16-oracle-sibling", lambda m=m, be=be: _ddtree(16, f"{m}@{be}", **_wy(m)), {"oracle": "sibling"}),
           ("ddtree64", lambda m=m, be=be: _ddtree(64, f"{m}@{be}", **_wy(m)), {}),
           ("ddtree-auto", lambda m=m, be=be: _auto(f"{m}@{be}", **_wy(m)), {"auto": True}))},
    # The controls beside them: sglang's own DFLASH on the same backend, and the hybrid through
    # sglang's per-node GatedDeltaNet path there.
    **{f"dflash-{m}@flashinfer": (f"{m}@flashinfer", lambda m=m: _dflash(f"{m}@flashinfer"),
                                  {"known_bad": HD64_HYBRID_SPEC} if m == "qwen3564" else {})
       for m in ("llama64", "qwen3564")},
    "ddtree64-qwen3564-snapshot@flashinfer": ("qwen3564@flashinfer", lambda: _ddtree(
        64, "qwen3564@flashinfer", speculative_ddtree_gdn_mode="snapshot", disable_radix_cache=True),
        _like_dflash("qwen3564", "flashinfer")),
    "ddtree-auto-qwen35": ("qwen35", lambda: _auto("qwen35"), {"auto": True}),
    # The radix cache on the tiny hybrid target. Its text-only architecture (Qwen3_5ForCausalLM)
    # is outside sglang 0.5.17's hybrid radix-cache resolution (_MAMBA_RADIX_CACHE_ARCHS), so the
    # strategy stays unresolved: no decode-time state tracking, the cache keeps the live state
    # when it inserts. The reruns restart from cached prefixes; on the H200: DDTREE
    # snapshot reran token for token and cache depth for depth like sglang's DFLASH; wy like
    # DFLASH except request 4 from position 11 (both sessions); all, and the rerun without
    # speculation, left the cache-less rerun (known: RERUN_KNOWN).
    "ddtree8-qwen35-wy-radix": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                          mamba_track_interval=TRACK_INTERVAL), {
        "radix_rerun": True, "rerun_like": "dflash-qwen35-radix",
        # In two H200 runs alike: request 4's rerun leaves DFLASH's at position 11 (DFLASH
        # refuses log-probs, so whether that is a near-tie is unknown); compared up to there.
        "rerun_like_known_cut": {3: 11}}),
    "ddtree8-qwen35-radix": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="snapshot",
                                                       mamba_track_interval=TRACK_INTERVAL),
                             {"radix_rerun": True, "rerun_like": "dflash-qwen35-radix"}),
    # The wy tracked state against sglang's per-node state of the same node (cross-check mode
    # runs both verifies; one log line per step that tracked). Needs an extra-buffer target: on
    # the tiny one nothing is tracked, reported as known, never as a pass.
    "ddtree8-qwen35-wy-check-radix": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                          speculative_ddtree_eager_verify=True,
                                                                mamba_track_interval=TRACK_INTERVAL), {
        "track_check": True, "known_untracked": "the tiny Qwen3_5ForCausalLM target is outside sglang's hybrid "
                                                "radix-cache resolution, which tracks no state on it",
        "env": {"SGLANG_DDTREE_WY_CHECK": "1"}}),
    # The reference (a plain engine without a prefix cache) and the controls: the same reruns
    # without speculation and with sglang's DFLASH chain.
    "nocache-qwen35-rerun": ("qwen35", lambda: dict(disable_radix_cache=True),
                             {"radix_rerun": True, "rerun_ref": True, "eager": True}),
    "nospec-qwen35-radix": ("qwen35", lambda: dict(mamba_track_interval=TRACK_INTERVAL),
                            {"radix_rerun": True, "eager": True, "control": True}),
    "dflash-qwen35-radix": ("qwen35", lambda: dict(_dflash("qwen35"), mamba_track_interval=TRACK_INTERVAL),
                            {"radix_rerun": True, "control": True}),
    # The same with sglang's extra-buffer strategy forced for the tiny target (XB_ENV; an earlier run's
    # first run found the switch incomplete: nothing resolved, everything cached as without it;
    # fixed, test/engine/test_server_args.py): decode steps track states at every TRACK_INTERVAL boundary.
    # On the H200: without speculation a rerun hit a tracked decode-time state
    # (deep); the speculative cases hit none (DFLASH and DDTREE alike: 0 cached tokens) because
    # the rerun prompts extend the plain run's output, which their first rounds left at early
    # bf16 near-ties (not "deep" here for that reason); DDTREE (snapshot and wy) reran token for
    # token like DFLASH, and wy's tracked states equal sglang's per-node states (the check case).
    "nospec-qwen35-xb-radix": ("qwen35", lambda: dict(mamba_track_interval=TRACK_INTERVAL),
                               {"radix_rerun": True, "eager": True, "control": True, "deep": True, "env": XB_ENV}),
    "dflash-qwen35-xb-radix": ("qwen35", lambda: dict(_dflash("qwen35"), mamba_track_interval=TRACK_INTERVAL),
                               {"radix_rerun": True, "control": True, "env": XB_ENV}),
    "ddtree8-qwen35-xb-radix": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="snapshot",
                                                          mamba_track_interval=TRACK_INTERVAL), {
        "radix_rerun": True, "rerun_like": "dflash-qwen35-xb-radix", "env": XB_ENV}),
    "ddtree8-qwen35-wy-xb-radix": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                             mamba_track_interval=TRACK_INTERVAL), {
        "radix_rerun": True, "rerun_like": "dflash-qwen35-xb-radix", "env": XB_ENV}),
    "ddtree8-qwen35-wy-check-xb-radix": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                          speculative_ddtree_eager_verify=True,
                                                                   mamba_track_interval=TRACK_INTERVAL), {
        "track_check": True, "env": dict(XB_ENV, SGLANG_DDTREE_WY_CHECK="1")}),
    # The engine's own default for a hybrid target with the radix cache on (wy).
    "ddtree8-qwen35-default": ("qwen35", lambda: _ddtree(8, "qwen35", speculative_ddtree_gdn_mode=None), {}),
    # The few-token product (kernels/skinny_gemm.py) in every linear layer of the hybrid target's
    # verify through --speculative-ddtree-gemm-table, with a table that names it for
    # every product at 1-8 requests (testing/skinny_tables.forced_table), the down projection with
    # the activation inside: lossless like cuBLAS's path, and /server_info lists the products it took.
    "ddtree15-qwen35-wy-skinny": ("qwen35", lambda: _ddtree(15, "qwen35", speculative_ddtree_gdn_mode="wy",
                                                            disable_radix_cache=True), {"skinny": True}),
    "ddtree-auto-qwen35-wy": ("qwen35", lambda: _auto("qwen35", speculative_ddtree_gdn_mode="wy",
                                                      disable_radix_cache=True), {"auto": True}),
    "ddtree-auto-capped-qwen35-wy": ("qwen35", lambda: _auto("qwen35", rows=AUTO_ROWS_CAPPED,
                                                             speculative_ddtree_gdn_mode="wy",
                                                             disable_radix_cache=True), {"auto": True}),
}

# Cases whose radix rerun others are compared with (``rerun_like``).
RERUN_LIKES = {c.get("rerun_like") for _, _, c in CASES.values()} - {None}

# Expected spec_correct_drafts_histogram per oracle mode for ORACLE_NEW tokens: "first" accepts
# all 15 drafts twice (1 + 2 * 16 tokens), "sibling" exactly one draft 16 times (1 + 16 * 2).
ORACLE_HISTOGRAM = {"first": [0] * 15 + [2], "sibling": [0, 16]}

# Developer-preview and known-limit configurations: their own suite (test_gpu_preview.py), so the
# smoke suite (test_gpu_smoke.py) states what is expected to work. Preview: the explicit
# CUDA-graph cases (the graph tree verify is the default, so every smoke DDTREE
# case asserts replays too; these keep the no-mask control and the wy graph variants), the wy
# diagnostics (cross-check, synchronous launches, scheduling variants) and budget 128 in wy mode,
# budget 128 on the hybrid through sglang's per-node path (its tree conv kernel compiles an
# unrolled loop over the verify width: the graph capture took 387 s on the H200), and budget auto
# with per-width verify graphs and the radix-cache reruns (newer, not yet run on a
# GPU). wy mode itself is in the
# smoke suite since it matched plain decoding on the H200 (results/ARCHIVE.md).
WY_SMOKE = ("ddtree8-qwen35-wy", "ddtree32-qwen35-wy", "ddtree64-qwen35-wy", "ddtree15-qwen35-wy-oracle-first",
            "ddtree16-qwen35-wy-oracle-sibling")
# Attention backends other than triton (model keys NAME@BACKEND): their own suite,
# test_gpu_backends.py, until they pass on a GPU.
BACKENDS = tuple(n for n in CASES if "@" in n)
PREVIEW = tuple(n for n in CASES if n not in BACKENDS and (("-wy" in n and n not in WY_SMOKE) or "-graphs" in n
                or n.startswith("ddtree-auto") or n.endswith("-radix") or n.endswith("-rerun")
                or n == "ddtree128-qwen35"))
SMOKE = tuple(n for n in CASES if n not in PREVIEW and n not in BACKENDS)


# bf16 near-tie tolerance (nats, = logit units). The speculative verify runs the target through
# extend kernels and GEMMs of another shape than plain decoding, so in bf16 the two paths'
# logits differ by rounding; with random tiny models a few greedy steps have a top-2 gap that
# small, and there the argmax may flip. A speculative output passes if it equals the plain one,
# or if it first differs at a position where the plain run's top-2 tokens are within this gap
# and it chose the other of the two (after that the prefixes differ, so nothing later is
# compared). Every such cut is reported with its gap.
NEAR_TIE_TOL = 0.05
# A speculative case's returned top-1 log-prob against the plain run's at the same position and
# token (bf16 logits of the verify's shapes against plain decoding's).
# Per target: the hybrid's GatedDeltaNet layers also run other kernels in the verify (the tree
# kernels, fp32 state) than in plain decoding. First H200 run: Llama worst 0.1 or less; hybrid
# median 0.016, worst 0.119 over 46 positions. The median bound catches a log-prob taken from
# another position (per-position log-probs of these models differ by 0.3 or more).
LOGPROB_TOL = {"llama": 0.1, "qwen35": 0.2}
LOGPROB_MEDIAN_TOL = 0.05


def logprob_tol(model: str) -> float:
    """``LOGPROB_TOL`` of a model key's kind (``qwen35...`` hybrids, else Llama)."""
    return LOGPROB_TOL["qwen35" if model.startswith("qwen35") else "llama"]


def compare_to_reference(got, ref, ref_top, tol: float = NEAR_TIE_TOL) -> dict:
    """``got``/``ref`` token lists; ``ref_top[i]``: the reference's top log-probs at position
    ``i``, best first, as ``(logprob, id, _)`` (two or more).

    At the first difference ``i`` it is a near-tie (``ok``) when ``got[i]`` is among
    ``ref_top[i]`` and its log-prob is within ``tol`` of the best; ``gap`` is that difference
    (the best minus the last listed when ``got[i]`` is not listed: a lower bound).

    Returns {"compared": n positions checked, "equal": bool, "near_tie": None or details}.
    """
    for i, (a, b) in enumerate(zip(got, ref)):
        if a == b:
            continue
        top = ref_top[i]
        lp = {int(e[1]): float(e[0]) for e in top}
        best = float(top[0][0])
        listed = a in lp
        gap = best - (lp[a] if listed else float(top[-1][0]))
        tie = listed and gap <= tol
        return {"compared": i, "equal": False,
                "near_tie": {"pos": i, "gap": gap, "ok": tie, "got": a, "ref": b, "listed": listed}}
    return {"compared": min(len(got), len(ref)), "equal": len(got) == len(ref), "near_tie": None}


def engine_kwargs(model: str, spec: dict) -> dict:
    kw = dict(
        model_path=_path(model), device="cuda", dtype="bfloat16", attention_backend=_backend(model),
        sampling_backend="pytorch", mem_fraction_static=0.3, max_total_tokens=8192,
        max_running_requests=8, cuda_graph_max_bs_decode=4, disable_prefill_cuda_graph=True,
        log_level="info",
    )
    kw.update(spec)
    return kw


def code_digest() -> str:
    """Digest of the package sources a case ran (results are reused only at the same digest)."""
    import hashlib

    pkg = HERE.parents[1] / "python" / "sglang_ddtree"
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _mamba_cache_lines(log_text: str) -> list:
    """sglang's linear-attention pool sizes as logged (the wy cases check the scratch is gone)."""
    return sorted({line.split("Mamba Cache is allocated. ", 1)[1].strip()
                   for line in log_text.splitlines() if "Mamba Cache is allocated. " in line})


def _track_checks(log_text: str) -> list:
    """``[tracked, state diff, state max, conv diff, conv max]`` per "wy track cross-check" line."""
    rows = []
    for line in log_text.splitlines():
        if "DDTREE wy track cross-check: " in line:
            t = line.split("DDTREE wy track cross-check: ", 1)[1].replace("(", " ").replace(")", " ").split()
            rows.append([int(t[0]), float(t[9]), float(t[11]), float(t[13]), float(t[15])])
    return rows


# The skinny GEMM case's table: budget 15 verifies 16 tokens a request; a tiling every tiny width
# divides (K a multiple of 32).
SKINNY_TILING = "bn32_bk32_sk1_st2_w4"


def skinny_test_table(model: str, device: str) -> dict:
    """The skinny case's table for ``model``'s shapes, marked as measured on ``device`` (the GPU's
    name: the flag refuses a table of another GPU)."""
    from sglang_ddtree.testing.skinny_tables import forced_table, qwen35_linear_shapes

    cfg = json.loads((Path(_path(model)) / "config.json").read_text())
    return forced_table(qwen35_linear_shapes(cfg), [16 * b for b in range(1, 9)], SKINNY_TILING, device)


def _graph_captures(log_text: str) -> list:
    return sorted({line.split("Capture ", 1)[1].split(" CUDA graph end")[0]
                   for line in log_text.splitlines() if "CUDA graph end" in line and "Capture " in line})


def run_case(name: str, out: Path) -> dict:
    """Run one case in this process (the child). Writes and returns the result record."""
    import sglang as sgl

    model, spec_fn, checks = CASES[name]
    env = dict(checks.get("env", {}))
    plain = name.startswith("plain-")
    if checks.get("oracle"):
        ref = json.loads((out / f"{reference(name)}.json").read_text())["output_ids"]
        oracle = out / f"{name}.oracle.json"
        from sglang_ddtree.testing.oracle_drafter import write_oracle_file

        write_oracle_file(oracle, checks["oracle"], zip(PROMPTS, ref))
        env["SGLANG_DDTREE_TEST_ORACLE"] = str(oracle)
    if plain:
        new = [REF_NEW] * len(PROMPTS)
    elif checks.get("oracle"):
        new = [ORACLE_NEW] * len(PROMPTS)
    else:
        new = MIXED_NEW
    spec = spec_fn()
    if checks.get("skinny"):
        import torch

        table = out / f"{name}.skinny.json"
        table.write_text(json.dumps(skinny_test_table(model, torch.cuda.get_device_name())))
        spec["speculative_ddtree_gemm_table"] = str(table)
    if checks.get("debug"):
        spec["speculative_ddtree_debug_jsonl"] = str(out / f"{name}.jsonl")
    t0 = time.time()
    with patched_env(env):
        engine = sgl.Engine(**engine_kwargs(model, spec))
    startup = time.time() - t0
    try:
        t1 = time.time()
        # The plain reference also returns its top-2 log-probs (near-tie check); a "logprobs"
        # case too, compared with it.
        with_top2 = plain or bool(checks.get("logprobs"))
        extra = dict(return_logprob=True, top_logprobs_num=2) if with_top2 else {}
        params = [dict(temperature=0.0, max_new_tokens=n, ignore_eos=False) for n in new]
        options = per_prompt_options(checks)
        if options:
            params = [dict(p, **o) for p, o in zip(params, options)]
        if checks.get("serial"):
            outs = [engine.generate(input_ids=[p], sampling_params=[sp], **extra)[0] for p, sp in zip(PROMPTS, params)]
        else:
            outs = engine.generate(input_ids=PROMPTS, sampling_params=params, **extra)
        gen = time.time() - t1
        rerun = None
        if checks.get("radix_rerun"):
            # Prompts extended by the plain run's first RERUN_AT tokens: their prefixes are in the
            # radix cache from the first round, past a tracking boundary (mamba_track_interval),
            # so the linear-attention state restarts from a state the decode steps tracked.
            ref_file = out / f"plain-{model}.json"
            for _ in range(300):  # the plain reference runs beside this case; wait for its output
                if ref_file.exists():
                    break
                time.sleep(1)
            ref = json.loads(ref_file.read_text())["output_ids"]
            # The references record their top-2 (near-tie cuts in the comparisons against them);
            # sglang 0.5.17's DFLASH refuses log-probs (the request fails), so its
            # rerun is compared token for token.
            wants_top2 = checks.get("rerun_ref") or name in RERUN_LIKES
            top2 = (dict(return_logprob=True, top_logprobs_num=2)
                    if wants_top2 and spec.get("speculative_algorithm") != "DFLASH" else {})
            r = engine.generate(input_ids=[p + o[:RERUN_AT] for p, o in zip(PROMPTS, ref)],
                                sampling_params=[dict(temperature=0.0, max_new_tokens=REF_NEW - RERUN_AT)] * len(PROMPTS),
                                **top2)
            rerun = dict(output_ids=[o["output_ids"] for o in r],
                         top2=[[[(lp, tid, None) for lp, tid, *_ in pos] for pos in o["meta_info"]["output_top_logprobs"]]
                               for o in r] if top2 else None,
                         cached_tokens=[o["meta_info"].get("cached_tokens", 0) for o in r])
        try:
            info = engine.get_server_info()
        except Exception as e:  # metrics are reported, never the reason a case fails
            info = {"error": repr(e)}
    finally:
        engine.shutdown()
    rec = dict(
        name=name, model=model, max_new_tokens=new, startup_s=round(startup, 1), generate_s=round(gen, 2),
        output_ids=[o["output_ids"] for o in outs],
        meta_info=[{k: v for k, v in o["meta_info"].items() if "logprobs" not in k} for o in outs],
        top2=[[[(lp, tid, None) for lp, tid, *_ in pos] for pos in o["meta_info"]["output_top_logprobs"]]
              for o in outs] if with_top2 else None,
        avg_spec_accept_length=(info.get("internal_states") or [{}])[0].get("avg_spec_accept_length"),
        ddtree=(info.get("internal_states") or [{}])[0].get("ddtree"),
        rerun=rerun,
    )
    (out / f"{name}.json").write_text(json.dumps(rec))
    return rec


def _spawn(name: str, out: Path, timeout_s: int) -> dict:
    log = out / f"{name}.log"
    t0 = time.time()
    with open(log, "w") as f:
        try:
            rc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "run", name, "--out", str(out)],
                                stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s,
                                start_new_session=True).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    res = out / f"{name}.json"
    rec = json.loads(res.read_text()) if res.exists() and rc == 0 else {"name": name}
    text = log.read_text(errors="replace")
    rec.update(rc=rc, wall_s=round(time.time() - t0, 1), graphs=_graph_captures(text), track_check=_track_checks(text),
               mamba_cache=_mamba_cache_lines(text), code_digest=code_digest())
    if rc != 0:
        rec["log_tail"] = log.read_text(errors="replace")[-3000:]
    (out / f"{name}.result.json").write_text(json.dumps(rec))
    print(f"[gpu_cases] {name}: rc={rc} wall={rec['wall_s']}s startup={rec.get('startup_s')}s "
          f"graphs={rec['graphs']}", flush=True)
    return rec


def _reusable(out: Path, name: str, digest: str) -> Optional[dict]:
    f = out / f"{name}.result.json"
    if not f.exists():
        return None
    rec = json.loads(f.read_text())
    return rec if rec.get("rc") == 0 and rec.get("code_digest") == digest else None


def run_all(out: Path, parallel: Optional[int] = None, only=None, timeout_s: Optional[int] = None,
            reuse: Optional[bool] = None) -> dict:
    """Run the cases in child processes, ``parallel`` at a time; returns ``{name: record}``.

    The plain references start first; a case that needs its reference's output (the oracle
    drafter) waits for it, every other case runs beside them. With ``reuse`` (or
    ``SGLANG_DDTREE_GPU_REUSE=1``) a case whose passing record is already in ``out`` from the
    same package sources (``code_digest``) is not run again: a selection split over several
    device calls is evaluated as one.
    """
    parallel = parallel or int(os.environ.get("SGLANG_DDTREE_GPU_PARALLEL", "4"))
    timeout_s = timeout_s or int(os.environ.get("SGLANG_DDTREE_GPU_CASE_TIMEOUT", "480"))
    reuse = os.environ.get("SGLANG_DDTREE_GPU_REUSE") == "1" if reuse is None else reuse
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in CASES if not only or n in only]
    plain = [n for n in names if n.startswith("plain-")]
    # Speculative cases need their plain reference; add it if the selection left it out.
    for n in names:
        for ref in {f"plain-{CASES[n][0]}", reference(n)}:
            if ref not in plain and ref != n:
                plain.append(ref)
    for n in list(names):  # a radix rerun is checked against the cache-less rerun (and DFLASH's)
        for dep in ((rerun_reference(CASES[n][0]), CASES[n][2].get("rerun_like")) if CASES[n][2].get("radix_rerun") else ()):
            if dep and dep not in names:
                names.append(dep)
    rest = [n for n in names if n not in plain]
    order = plain + [n for n in rest if not CASES[n][2].get("oracle")] + [n for n in rest if CASES[n][2].get("oracle")]
    # Build the tiny models once here (atomic builds would survive a race, but waste minutes).
    for m in sorted({CASES[n][0].split("@")[0] for n in names}):
        _path(m)
        _path(f"dflash-{m}")
    digest = code_digest()
    results, futures = {}, {}

    def one(name):
        old = _reusable(out, name, digest) if reuse else None
        if old is not None:
            print(f"[gpu_cases] {name}: reused (rc=0, code {digest})", flush=True)
            return old
        if CASES[name][2].get("oracle"):  # needs the plain run's output
            futures[f"plain-{CASES[name][0]}"].result()
        return _spawn(name, out, timeout_s)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        for n in order:  # plain first: the queue hands them out first
            futures[n] = pool.submit(one, n)
        for n in order:
            rec = futures[n].result()
            results[rec["name"]] = rec
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    return results


def _ok(results: dict, name: str) -> dict:
    assert name in results, f"{name}: no record"
    rec = results[name]
    assert rec["rc"] == 0, f"{name} failed:\n{rec.get('log_tail', '')}"
    return rec


def assert_plain(results: dict, model: str) -> None:
    """The plain reference ran with decode CUDA graphs and produced every token (a run with
    per-prompt options: at least one token per request; a grammar or EOS may end it early)."""
    rec = _ok(results, f"plain-{model}")
    assert "target decode" in rec["graphs"], rec["graphs"]
    if per_prompt_options(CASES[f"plain-{model}"][2]):
        assert all(0 < len(o) <= REF_NEW for o in rec["output_ids"])
    else:
        assert all(len(o) == REF_NEW for o in rec["output_ids"])


def assert_speculative(results: dict, name: str) -> Optional[str]:
    """Every assertion on a speculative case; returns an xfail reason for a ``known_bad`` case
    that failed its equality (the caller decides), else None."""
    rec = _ok(results, name)
    ref = _ok(results, reference(name))
    cmp = [compare_to_reference(got, r[:n], top2)
           for got, r, top2, n in zip(rec["output_ids"], ref["output_ids"], ref["top2"], rec["max_new_tokens"])]
    checks = CASES[name][2]
    passed = all(c["equal"] or (c["near_tie"] and c["near_tie"]["ok"]) for c in cmp)
    if checks.get("expect_mismatch"):  # a negative control: it must fail the equality
        assert not passed, cmp
        return None
    # DDTREE's tree verify replays CUDA graphs by default (engine/verify_graph.py): every DDTREE
    # case with graphs allowed must show replays.
    graphs = checks.get("graphs", name.startswith("ddtree") and not checks.get("eager")
                        and not CASES[name][1]().get("speculative_ddtree_eager_verify"))
    if graphs:  # the verify really replayed CUDA graphs
        assert (rec.get("ddtree") or {}).get("verify_cuda_graph_steps", 0) > 0, rec.get("ddtree")
    if checks.get("auto"):  # every step replayed a graph, of both widths the policy picked
        dd = rec.get("ddtree") or {}
        assert dd.get("verify_cuda_graph_steps") == dd.get("steps") > 0, dd
        used = (dd.get("budget_policy") or {}).get("steps_by_choice") or {}
        assert used.get("chain", 0) > 0 and used.get("32", 0) > 0, used
    if checks.get("skinny"):  # the verify's GatedDeltaNet and MLP products ran through the kernel
        from sglang_ddtree.kernels.skinny_gemm import SILU_MUL
        from sglang_ddtree.testing.skinny_tables import qwen35_linear_shapes

        cfg = json.loads((Path(_path(rec["model"])) / "config.json").read_text())
        shapes = qwen35_linear_shapes(cfg)
        reported = (rec.get("ddtree") or {}).get("skinny_gemm_routed") or []  # /server_info
        routed = {(n, k, act) for m, n, k, act, tiling in reported}
        want = {shapes["gdn_in_proj_qkvz"] + (None,), shapes["gdn_out_proj"] + (None,),
                shapes["mlp_gate_up"] + (None,), shapes["mlp_down"] + (SILU_MUL,)}
        assert want <= routed, dict(missing=sorted(want - routed, key=str), routed=reported)
    known = None
    if checks.get("track_check"):  # the wy tracked states equal sglang's per-node ones
        rows = rec.get("track_check") or []
        if not rows and checks.get("known_untracked"):
            known = f"known: nothing tracked ({checks['known_untracked']})"
        else:
            assert rows and sum(r[0] for r in rows) > 0, rows
        for n, ds, ms, dc, mc in rows:  # fp32 state: rounding only; conv window: bit-identical
            assert ds <= 1e-5 * max(ms, 1e-30) and dc == 0.0, rows
    if checks.get("radix_rerun"):  # the rerun restarted from cached, tracked state, losslessly
        rr = rec["rerun"]
        if checks.get("rerun_ref"):  # the reference itself: nothing cached, every token produced
            assert rr["cached_tokens"] == [0] * len(PROMPTS) and rr["top2"], rr["cached_tokens"]
            assert all(len(o) == REF_NEW - RERUN_AT for o in rr["output_ids"]), rr["output_ids"]
        else:
            if checks.get("rerun_like"):  # the prefix cache behaves as with sglang's own speculation
                like = _ok(results, checks["rerun_like"])["rerun"]
                assert rr["cached_tokens"] == like["cached_tokens"], dict(got=rr["cached_tokens"], like=like["cached_tokens"])
                cuts = checks.get("rerun_like_known_cut") or {}
                for i, (got, r) in enumerate(zip(rr["output_ids"], like["output_ids"])):
                    if i in cuts:  # a documented divergence: equal up to it
                        got, r = got[:cuts[i]], r[:cuts[i]]
                    if like.get("top2"):  # equal, or cut at a near-tie of the control's rerun
                        c = compare_to_reference(got, r, like["top2"][i])
                        assert c["equal"] or (c["near_tie"] and c["near_tie"]["ok"]), dict(request=i, like=c)
                    else:  # (session-7 records: the control kept no log-probs)
                        assert got == r, dict(request=i, got=got, like=r)
            if checks.get("deep"):  # a tracked decode-time state was cached and reused
                # (the cache keeps a request's last tracked state only: a rerun shorter than it
                # cannot use it, so not every request hits; on the H200: 0/16/0/0)
                assert any(c >= TRACK_INTERVAL for c in rr["cached_tokens"]), rr["cached_tokens"]
            want = _ok(results, rerun_reference(rec["model"]))["rerun"]
            rcmp = [compare_to_reference(got, r, top2)
                    for got, r, top2 in zip(rr["output_ids"], want["output_ids"], want["top2"])]
            same = [c["equal"] or bool(c["near_tie"] and c["near_tie"]["ok"]) for c in rcmp]
            if not all(same):
                detail = dict(rerun_equal=same, cached_tokens=rr["cached_tokens"], cmp=rcmp)
                # Known only where sglang's own engine does the same: the controls themselves, and
                # DDTREE cases that matched their control above (RERUN_KNOWN).
                assert rec["model"] == "qwen35" and (checks.get("control") or checks.get("rerun_like")), detail
                known = f"known: {RERUN_KNOWN} ({detail})"
    if checks.get("spec_like") and not passed:
        # Where sglang's own DFLASH on the same backend leaves the plain run as well, the case
        # must equal it token for token: the divergence is then the speculative verify's shapes
        # in bf16, shared with sglang's own engine, not DDTREE's.
        like = _ok(results, checks["spec_like"])
        like_cmp = [compare_to_reference(got, r[:n], top2) for got, r, top2, n in
                    zip(like["output_ids"], ref["output_ids"], ref["top2"], like["max_new_tokens"])]
        assert not all(c["equal"] or (c["near_tie"] and c["near_tie"]["ok"]) for c in like_cmp), dict(
            control_matches_plain=checks["spec_like"], cmp=cmp)
        for i, (got, r) in enumerate(zip(rec["output_ids"], like["output_ids"])):
            n = min(len(got), len(r))
            assert n > 0 and got[:n] == r[:n], dict(request=i, got=got, like=r)
        return f"known: equal to {checks['spec_like']} token for token; both leave plain decoding ({cmp})"
    if checks.get("known_bad") and not passed:
        return f"known: {checks['known_bad']} ({cmp})"
    if known is not None:
        for c in cmp:  # the first round is still checked in full
            assert c["equal"] or (c["near_tie"] and c["near_tie"]["ok"]), cmp
        return known
    for c in cmp:  # equal, or cut at a documented bf16 near-tie of the plain run
        assert c["equal"] or (c["near_tie"] and c["near_tie"]["ok"]), cmp
    # Near-tie cuts must leave a real comparison: at least a quarter of the requested tokens.
    assert sum(c["compared"] for c in cmp) >= sum(rec["max_new_tokens"]) / 4, cmp
    # The speculative verify or draft ran under a captured graph.
    if not checks.get("eager"):
        assert any("verify" in g for g in rec["graphs"]), rec["graphs"]
    accepts = [m.get("spec_accept_length", 0.0) for m in rec["meta_info"]]
    if checks.get("accepts"):
        assert max(accepts) > 1.0, accepts
    if checks.get("logprobs"):  # the returned log-probs are the plain run's, where the tokens agree
        diffs = []
        for i, (c, got2, ref2) in enumerate(zip(cmp, rec["top2"], ref["top2"])):
            assert len(got2) == len(rec["output_ids"][i]) and all(len(p) == 2 for p in got2), i
            for pos in range(c["compared"]):
                (glp, gid, _), (rlp, rid, _) = got2[pos][0], ref2[pos][0]
                if gid == rid:
                    diffs.append(abs(glp - rlp))
        worst, median = (max(diffs), sorted(diffs)[len(diffs) // 2]) if diffs else (None, None)
        assert diffs and worst <= logprob_tol(rec["model"]) and median <= LOGPROB_MEDIAN_TOL, dict(
            worst=worst, median=median, positions=len(diffs))
    if per_prompt_options(checks):  # whole paths accepted under the grammars' masks / the penalties
        assert max(m.get("spec_accept_length", 0.0) for m in rec["meta_info"]) > 2.0, rec["meta_info"]
    elif checks.get("oracle"):
        want = ORACLE_HISTOGRAM[checks["oracle"]]
        for m, c in zip(rec["meta_info"], cmp):
            if c["equal"]:  # the oracle's continuation is the plain run's; valid only there
                assert m["spec_correct_drafts_histogram"] == want, m
    return None


def check(out: Path, names=None) -> int:
    """Apply the GPU suites' assertions to the records in ``out``, on any machine: for a suite
    whose pytest run was stopped, or one split over several device calls. Prints one verdict per
    case of ``names`` (default: every case); returns the number that failed or are missing."""
    results = {}
    for f in sorted(out.glob("*.result.json")):
        rec = json.loads(f.read_text())
        results[rec["name"]] = rec
    bad = 0
    for name in names or CASES:
        if name not in results:
            print(f"MISSING {name}")
            bad += 1
            continue
        suite = "preview" if name in PREVIEW else "smoke"
        try:
            if name.startswith("plain-"):
                assert_plain(results, name.split("-", 1)[1])
                xfail = None
            else:
                xfail = assert_speculative(results, name)
            print(f"{'XFAIL' if xfail else 'PASS':7} {name} [{suite}]" + (f": {xfail[:200]}" if xfail else ""))
        except AssertionError as e:
            print(f"FAIL    {name} [{suite}]: {str(e)[:300]}")
            bad += 1
    return bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", help="'all', 'run' or 'check'")
    ap.add_argument("name", nargs="?")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parallel", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--suite", choices=["smoke", "preview", "all"], default="all", help="for 'check'")
    a = ap.parse_args()
    if a.what == "run":
        run_case(a.name, a.out)
        return 0
    if a.what == "check":
        names = {"smoke": SMOKE, "preview": PREVIEW, "all": tuple(CASES)}[a.suite]
        return 1 if check(a.out, names) else 0
    res = run_all(a.out, a.parallel, [s for s in a.only.split(",") if s])
    return 0 if all(r["rc"] == 0 for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
