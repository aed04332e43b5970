"""Trace recording through sglang on CPU, on the tiny random Llama pair: the recording mode's
output is the target's greedy output (the same engine without speculation) and the trace has the
documented shapes; the offline simulator on the trace gives what a DDTREE engine (budget 32) in
normal mode reports per request: verify steps, accept length, and the accepted-draft histogram,
exact except at a censored last step, where the engine's count is at least the simulator's lower
bound. The mode refuses overlap scheduling. (The chain, which accepts nothing on the tiny pair,
is compared with the simulator in ``test_trace_replay_cpu.py``, on a replayed trace whose
drafts are accepted, for DDTREE and sglang's DFLASH.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cpu_engine import PROMPTS
from sglang_ddtree.core import trace_sim
from sglang_ddtree.core.traces import TraceSet
from sglang_ddtree.testing import tiny_models

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark" / "ddtree"))
from accept_sweep import _serve  # noqa: E402
from record_traces import metadata, record  # noqa: E402

pytestmark = pytest.mark.e2e

N = 24
K = 8
RECORD_BUDGET = 4


@pytest.fixture(scope="module")
def pair():
    return str(tiny_models.model_path("llama")), str(tiny_models.model_path("dflash-llama"))


@pytest.fixture(scope="module")
def recorded(pair):
    target, drafter = pair
    traces, outs, _ = record(target, drafter, PROMPTS, N, K, RECORD_BUDGET)
    return traces, outs


def _engine_matches_simulation(pair, prompts, max_new, traces, outs, spec, cfg) -> list:
    """A DDTREE engine in normal mode (``spec``) on ``prompts``: its outputs are the recorded ones
    and every request's statistics are the simulator's under ``cfg``; returns the simulation."""
    target, drafter = pair
    engine, _ = _serve(target, prompts, max_new, speculative_algorithm="DDTREE", speculative_draft_model_path=drafter,
                       **spec)
    assert [o["output_ids"] for o in engine] == [o["output_ids"] for o in outs]
    sims = trace_sim.simulate(traces, cfg)
    for res, o in zip(sims, engine):
        _matches_engine(res, o["meta_info"])
    return sims


def _matches_engine(res: trace_sim.SimResult, meta: dict) -> None:
    """The simulator's steps against one engine request's ``meta_info``."""
    assert meta["completion_tokens"] == res.output_len
    assert meta["spec_verify_ct"] == res.steps
    assert meta["spec_accept_length"] == res.spec_accept_length
    engine = list(meta["spec_correct_drafts_histogram"])
    exact = [a for a, c in zip(res.drafts, res.censored) if not c]
    lower = [a for a, c in zip(res.drafts, res.censored) if c]
    for a in exact:
        assert engine[a] > 0, (engine, res.drafts, res.censored)
        engine[a] -= 1
    rest = sorted(a for a, n in enumerate(engine) for _ in range(n))
    assert len(rest) == len(lower) and all(e >= s for e, s in zip(rest, sorted(lower))), (meta, res.drafts)


def test_recording_is_greedy_and_has_the_documented_shapes(pair, recorded, tmp_path):
    traces, outs = recorded
    target, drafter = pair
    plain, _ = _serve(target, PROMPTS, N)
    assert [o["output_ids"] for o in outs] == [o["output_ids"] for o in plain]
    assert all(o["meta_info"]["spec_correct_drafts_histogram"] == [o["meta_info"]["spec_verify_ct"]] for o in outs)
    for tr, prompt, o in zip(traces, PROMPTS, outs):
        T = len(o["output_ids"])
        assert T > 1 and tr.output.tolist() == o["output_ids"] and tr.prompt.tolist() == prompt
        assert tuple(tr.topk_logprobs.shape) == (T, tiny_models.DFLASH_BLOCK_SIZE - 1, K) == tuple(tr.topk_ids.shape)
        assert tr.positions == T - 1 == o["meta_info"]["spec_verify_ct"]
    ts = TraceSet(meta=metadata(target, drafter, traces, prompt_set="tiny"), requests=traces)
    ts.save(tmp_path / "tiny.pt")
    back = TraceSet.load(tmp_path / "tiny.pt")
    assert back.meta["topk"] == K and back.meta["block_size"] == tiny_models.DFLASH_BLOCK_SIZE
    assert back.meta["target_sha256"] == tiny_models.fingerprint("llama") and back.positions == sum(
        len(o["output_ids"]) - 1 for o in outs)
    for res, tr in zip(trace_sim.simulate(traces, trace_sim.SimConfig(budget=RECORD_BUDGET)), traces):
        assert min(res.committed) >= 1 and sum(res.committed) == res.output_len - 1


def test_simulator_equals_the_engine(pair, recorded):
    """Budget 32 on the tiny pair (its random drafter's tree accepts a few drafts; its chain
    accepts nothing: test_trace_replay_cpu.py compares it on a replayed trace)."""
    traces, outs = recorded
    sims = _engine_matches_simulation(pair, PROMPTS, N, traces, outs, dict(speculative_ddtree_budget=32),
                                      trace_sim.SimConfig(budget=32))
    assert sum(sum(r.drafts) for r in sims) > 0


def test_recording_refuses_overlap_scheduling():
    """The recording mode's check after the worker starts (registered by the test plugin when
    the variable is set)."""
    import types

    from sglang_ddtree.testing.trace_recording import refuse_overlap

    worker = lambda overlap: types.SimpleNamespace(  # noqa: E731
        server_args=types.SimpleNamespace(disable_overlap_schedule=not overlap))
    assert refuse_overlap("made", worker(False)) == "made"
    with pytest.raises(RuntimeError, match="needs --disable-overlap-schedule"):
        refuse_overlap("made", worker(True))
