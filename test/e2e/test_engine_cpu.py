"""Real sglang on CPU through ``sglang.Engine``: HF equality and sglang's own DFLASH (the harness).

Every comparison is on token ids. Only one Engine may live in a process at a time
(``Engine.shutdown`` kills every child process of the caller, a sibling engine's scheduler
included), so each configuration starts, generates and shuts down in turn; the no-speculation
run is done once per module and its outputs are shared.
"""

from __future__ import annotations

import os

import pytest

from cpu_engine import PROMPTS, dflash_kwargs, engine_kwargs, greedy, hf_greedy

pytestmark = pytest.mark.e2e

MAX_NEW = 24


def _generate(engine, prompts, max_new=MAX_NEW):
    outs = engine.generate(input_ids=prompts, sampling_params=greedy(max_new))
    return [o["output_ids"] for o in outs], outs


@pytest.fixture(scope="module")
def marker_file(tmp_path_factory):
    return tmp_path_factory.mktemp("plugin") / "marker.txt"


@pytest.fixture(scope="module")
def plain_run(marker_file):
    """No-speculation outputs: (24-token outputs, 40-token outputs)."""
    import sglang as sgl

    os.environ["SGLANG_DDTREE_PLUGIN_MARKER"] = str(marker_file)
    try:
        engine = sgl.Engine(**engine_kwargs())
    finally:
        del os.environ["SGLANG_DDTREE_PLUGIN_MARKER"]
    try:
        return _generate(engine, PROMPTS)[0], _generate(engine, PROMPTS, 40)[0]
    finally:
        engine.shutdown()


def test_plugin_register_runs_in_launcher_and_scheduler(plain_run, marker_file):
    rows = [tuple(map(int, line.split())) for line in marker_file.read_text().splitlines()]
    me = os.getpid()
    # The scheduler is spawned by this process and must have run register() itself.
    children = [pid for pid, ppid in rows if ppid == me]
    assert children, f"register() did not run in any spawned scheduler process: {rows}"
    # Each process registers exactly once even though sglang calls load_plugins repeatedly.
    assert len(rows) == len({pid for pid, _ in rows})
    # The launcher registered too (maybe earlier in this test session, before the marker
    # was set): the plugin's algorithm is known here.
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from sglang_ddtree import plugin

    assert plugin._registered
    assert SpeculativeAlgorithm.from_string("DDTREE").is_dflash_family()


def test_plain_greedy_equals_hf_batch_of_mixed_lengths(plain_run):
    got = plain_run[0]
    for prompt, ids in zip(PROMPTS, got):
        assert ids == hf_greedy("llama", tuple(prompt), MAX_NEW)
    assert all(len(ids) > 0 for ids in got)


@pytest.fixture(scope="module")
def plain_reference(plain_run):
    return plain_run[1]


def test_dflash_chain_equals_no_speculation(plain_reference):
    import sglang as sgl

    engine = sgl.Engine(**engine_kwargs(**dflash_kwargs()))
    try:
        got, outs = _generate(engine, PROMPTS, 40)
        single, _ = _generate(engine, [PROMPTS[2]], 40)
    finally:
        engine.shutdown()
    assert got == plain_reference
    assert single[0] == plain_reference[2]
    # Speculation really ran: DFLASH reports its verify counters per request.
    assert all(o["meta_info"]["spec_verify_ct"] > 0 for o in outs)

