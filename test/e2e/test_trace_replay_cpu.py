"""The benchmark-only replay drafter (``SGLANG_DDTREE_BENCH_REPLAY``, ``testing/trace_replay.py``)
through sglang on CPU, on the tiny random Llama pair and a synthetic trace whose outputs are
random tokens (not the tiny target's greedy output) and whose drafter is partly right: every
replayed engine's output is the trace's, and per request its verify steps, accept length and
accepted-draft histogram equal ``trace_sim.simulate``'s exactly, for DDTREE's chain, two
budgets, and sglang's DFLASH (the chain's); a prompt the trace does not hold is refused alone
(the scheduler aborts it: ValueError from the engine), the engine serving on. Unit-level: the switch refuses real weights,
the scheduler-side binding refuses an unknown prompt, and every hook target resolves."""

from __future__ import annotations

import math
import random
import types

import pytest
import torch

from cpu_engine import PROMPTS, patched_env
from sglang_ddtree.config import BENCH_REPLAY
from sglang_ddtree.core import trace_sim
from sglang_ddtree.core.traces import RequestTrace, TraceSet
from sglang_ddtree.testing import tiny_models
from sglang_ddtree.testing.trace_replay import Replay, refuse_real_weights, replay_requests

L = tiny_models.DFLASH_BLOCK_SIZE - 1
K = 4


def synthetic_trace(seed: int, prompt, T: int) -> RequestTrace:
    """Random output tokens (no special token); at each state and depth the true token at rank 0
    with probability 0.7, at rank 1..3 with 0.2, absent otherwise; sorted random log-probs."""
    rng = random.Random(seed)
    vocab = range(4, tiny_models.VOCAB_SIZE)
    out = [rng.choice(vocab) for _ in range(T)]
    lp = torch.full((T, L, K), float("-inf"))
    ids = torch.full((T, L, K), -1, dtype=torch.int32)
    for p in range(1, T):
        for d in range(1, L + 1):
            true = out[p + d - 1] if p + d - 1 < T else None
            row = rng.sample([t for t in vocab if t != true], K)
            u = rng.random()
            if true is not None and u < 0.9:
                row[0 if u < 0.7 else rng.randrange(1, K)] = true
            ids[p, d - 1] = torch.tensor(row, dtype=torch.int32)
            probs = sorted((rng.random() for _ in range(K)), reverse=True)
            lp[p, d - 1] = torch.tensor([math.log(x / (sum(probs) + 1)) for x in probs])
    return RequestTrace(rid=f"syn{seed}", prompt=torch.tensor(prompt, dtype=torch.int32),
                        output=torch.tensor(out, dtype=torch.int32), topk_logprobs=lp, topk_ids=ids,
                        finish_reason="length")


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    traces = [synthetic_trace(i, p, T) for i, (p, T) in enumerate(zip(PROMPTS, (30, 21, 26, 17)))]
    path = tmp_path_factory.mktemp("replay") / "synthetic.pt"
    TraceSet(meta={"prompt_set": "synthetic", "topk": K}, requests=traces).save(path)
    return path, traces


UNKNOWN = [9, 9, 9, 9]  # a prompt the trace does not hold


def _serve_replay(path, **spec) -> tuple:
    """The trace's requests (``replay_requests``) through one engine on the tiny Llama pair with
    the switch set, then a request of a prompt the trace does not hold: ``(outputs, the error
    that request raised)``; the first trace request is served again after it."""
    import sglang as sgl

    from cpu_engine import engine_kwargs

    reqs = replay_requests(path)
    with patched_env({BENCH_REPLAY.name: str(path)}):
        engine = sgl.Engine(**engine_kwargs("llama", speculative_draft_model_path=str(
            tiny_models.model_path("dflash-llama")), **spec))
        try:
            outs = engine.generate(input_ids=[r["input_ids"] for r in reqs],
                                   sampling_params=[r["sampling_params"] for r in reqs])
            with pytest.raises(ValueError) as err:
                engine.generate(input_ids=UNKNOWN, sampling_params=reqs[0]["sampling_params"])
            again = engine.generate(input_ids=reqs[0]["input_ids"], sampling_params=reqs[0]["sampling_params"])
            assert again["output_ids"] == outs[0]["output_ids"]
            return outs, str(err.value)
        finally:
            engine.shutdown()


def _hist(h) -> list:
    h = list(h)
    while h and h[-1] == 0:
        h.pop()
    return h


def _assert_replays(outs, traces, cfg) -> list:
    sims = trace_sim.simulate(traces, cfg)
    for o, tr, res in zip(outs, traces, sims):
        meta = o["meta_info"]
        assert o["output_ids"] == tr.output.tolist()  # the trace's output, by construction
        assert meta["spec_verify_ct"] == res.steps, (tr.rid, meta, res.drafts)
        assert meta["spec_accept_length"] == res.spec_accept_length
        # exact at a censored last step too: past the output the target's token is no draft
        assert _hist(meta["spec_correct_drafts_histogram"]) == _hist(trace_sim.drafts_histogram(res)), (
            tr.rid, meta["spec_correct_drafts_histogram"], res.drafts)
    return sims


CASES = {
    "chain": (dict(speculative_algorithm="DDTREE", speculative_ddtree_budget=L, speculative_ddtree_topk=1),
              trace_sim.CHAIN),
    "DDTREE-4": (dict(speculative_algorithm="DDTREE", speculative_ddtree_budget=4, speculative_ddtree_topk=K),
                 trace_sim.SimConfig(budget=4)),
    "DDTREE-24": (dict(speculative_algorithm="DDTREE", speculative_ddtree_budget=24, speculative_ddtree_topk=K),
                  trace_sim.SimConfig(budget=24)),
    "DFLASH": (dict(speculative_algorithm="DFLASH"), trace_sim.CHAIN),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(CASES))
def test_a_replayed_engine_accepts_what_the_simulator_says(trace_file, case):
    path, traces = trace_file
    spec, cfg = CASES[case]
    outs, error = _serve_replay(path, **spec)
    sims = _assert_replays(outs, traces, cfg)
    assert sum(sum(r.drafts) for r in sims) > 0
    assert f"{BENCH_REPLAY.name}: request(s)" in error and "does not hold" in error


def test_the_switch_refuses_real_weights():
    tiny = str(tiny_models.model_path("llama"))
    args = lambda model, fmt="auto", draft=None, draft_fmt=None: types.SimpleNamespace(  # noqa: E731
        model_path=model, load_format=fmt, speculative_draft_model_path=draft, speculative_draft_load_format=draft_fmt)
    refuse_real_weights(args(tiny, draft=str(tiny_models.model_path("dflash-llama"))))
    refuse_real_weights(args("/models/Qwen3.6-27B", "dummy", "/models/Qwen3.6-27B-DFlash"))
    with pytest.raises(RuntimeError, match=f"{BENCH_REPLAY.name}.*target /models/Qwen3.6-27B"):
        refuse_real_weights(args("/models/Qwen3.6-27B"))
    with pytest.raises(RuntimeError, match="drafter /models/d \\(load_format auto\\)"):
        refuse_real_weights(args("/models/t", "dummy", "/models/d", "auto"))


def test_a_prompt_the_trace_does_not_hold_fails(trace_file):
    path, traces = trace_file
    replay = Replay(path, "cpu")
    replay.reserve(8)
    req = lambda ids, slot: types.SimpleNamespace(origin_input_ids=ids, req_pool_idx=slot, rid=f"r{slot}")  # noqa: E731
    replay.bind([req(PROMPTS[2], 5), req(PROMPTS[0], 1)])
    assert replay.slot_req.tolist() == [-1, 0, -1, -1, -1, 2, -1, -1]
    with pytest.raises(RuntimeError, match=f"{BENCH_REPLAY.name}: request\\(s\\) \\['r3'\\] have a prompt"):
        replay.bind([req(PROMPTS[1], 2), req([7, 7, 7], 3)])
    aborted = req([7, 7, 7], 4)
    aborted.to_finish = "abort"  # already aborted by the scheduler's validation: still prefilled, bound anywhere
    replay.bind([aborted])
    assert int(replay.slot_req[4]) == 0


def test_every_hook_target_resolves():
    """The replay's hooks are registered only under the switch (so ``test/compat/test_hook_targets.py``
    does not see them): each target must exist in the installed sglang."""
    import pkgutil

    from sglang_ddtree.testing import trace_replay

    for target, name, kind in trace_replay.HOOKS:
        obj_path, attr = target.rsplit(".", 1)
        assert hasattr(pkgutil.resolve_name(obj_path), attr), target
        assert callable(getattr(trace_replay, name)) and kind in ("BEFORE", "AFTER", "AROUND")
