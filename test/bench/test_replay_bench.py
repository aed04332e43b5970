"""``benchmark/ddtree/replay_bench.py`` runs to the end on CPU with the tiny Llama pair and a
synthetic trace (random outputs, a partly right drafter: ``test/e2e/test_trace_replay_cpu.py``'s):
one row per configuration and concurrency, every output the trace's, the measured accept length
the simulator's exactly (per request too), budget auto's choices reported, the table printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "e2e"))

from cpu_engine import PROMPTS  # noqa: E402
from test_trace_replay_cpu import K, synthetic_trace  # noqa: E402

CONFIGS = ["no-spec", "DDTREE-chain", "DDTREE-auto"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU smoke mode (the GPU runs the real sweep)")
def test_replay_bench_smoke_with_the_tiny_pair(tmp_path):
    from sglang_ddtree.core import trace_sim
    from sglang_ddtree.core.traces import TraceSet
    from sglang_ddtree.testing import tiny_models

    traces = [synthetic_trace(i, p, T) for i, (p, T) in enumerate(zip(PROMPTS[:3], (16, 11, 13)))]
    trace = tmp_path / "syn.pt"
    TraceSet(meta={"prompt_set": "synthetic", "topk": K}, requests=traces).save(trace)
    table = tmp_path / "step_cost.json"  # budget auto's table: the chain, budgets 4 and 8
    table.write_text(json.dumps({"meta": {}, "rows": [
        dict(config=c, concurrency=n, ms_per_step=ms) for c, n, ms in [
            ("DDTREE-chain", 1, 10.0), ("DDTREE-chain", 2, 12.0), ("DDTREE-4", 1, 10.5),
            ("DDTREE-4", 2, 12.5), ("DDTREE-8", 1, 11.0), ("DDTREE-8", 2, 14.0)]]}))
    out = tmp_path / "replay.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "replay_bench.py"), "--trace", str(trace),
                        "--target-path", str(tiny_models.model_path("llama")),
                        "--drafter-path", str(tiny_models.model_path("dflash-llama")),
                        "--configs", *CONFIGS, "--concurrency", "1", "2", "--rounds", "1", "--warmup-requests", "1",
                        "--ddtree-arg", f"speculative_ddtree_topk={K}", "--auto-table", str(table),
                        "--pin", "chain", "4", "--phases", "--out", str(out), "--plot", str(tmp_path / "replay.png")],
                       capture_output=True, text=True, timeout=600,
                       # one OpenMP thread per process: on 2 shared cores the engine processes' spinning
                       # OpenMP threads slow a 3-request round from ~0.3 s to 5-15 s
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    d = json.loads(out.read_text())
    meta, rows = d["meta"], d["rows"]
    assert "failed" not in meta and "problems" not in meta, meta
    assert meta["trace_requests"] == 3 and meta["trace_output_tokens"] == 40 and meta["device"] == "cpu"
    assert meta["commit"] and meta["auto_table"]["given"] == [str(table)]
    # DDTREE-auto's engine serves the pinned choices too: after auto's row, one per pin.
    want = [(c, n) for c in CONFIGS[:-1] for n in (1, 2)]
    want += [(f"DDTREE-auto{p}", n) for n in (1, 2) for p in ("", "=chain", "=4")]
    assert [(x["config"], x["concurrency"]) for x in rows] == want
    by = {(x["config"], x["concurrency"]): x for x in rows}
    # Every row: the trace's outputs, positive rates, the median round's values beside each round's.
    for x in rows:
        assert x["outputs_ok"] and "failed" not in x, x
        assert x["tok_s_per_request"] > 0 and x["tok_s_total"] > 0 and x["wall_s"] > 0, x
        assert x["requests_per_round"] == 3 and len(x["tok_s_per_request_rounds"]) == 1
        assert x["accept_length_per_request"] and len(x["accept_length_per_request"]) == 3
        assert "phase_ms" not in x  # --phases times CUDA events: nothing on the CPU engine
    # Without speculation one token per target forward; the ratios to it are written per row.
    for n in (1, 2):
        assert by["no-spec", n]["accept_length"] == 1.0 == by["no-spec", n]["sim_accept_length"]
        assert by["no-spec", n]["vs_no_spec"] == 1.0
    # The chain: exactly the simulator's, per request and over the set; drafts were accepted.
    chain = trace_sim.simulate(traces, trace_sim.CHAIN)
    for n in (1, 2):
        x = by["DDTREE-chain", n]
        assert x["sim_agrees"] is True and x["sim_config"] == "chain"
        assert x["accept_length"] == x["sim_accept_length"] == round(trace_sim.tokens_per_step(chain), 4) > 1.0
        assert x["accept_length_per_request"] == [round(s.spec_accept_length, 4) for s in chain]
    # Budget auto: its choices over the timed steps, each choice's simulated value beside them;
    # exact where one choice made every timed step.
    for n in (1, 2):
        x = by["DDTREE-auto", n]
        used = {k for k, v in x["choices"].items() if v}
        assert used and used <= {"chain", "4", "8"}, x
        assert sum(x["choices"].values()) == x["timed"]["steps"] >= 1
        assert set(x["sim_by_choice"]) == used
        if len(used) == 1:
            assert x["sim_agrees"] is True and x["accept_length"] == x["sim_accept_length"]
        else:
            assert x["sim_agrees"] is None and x["sim_accept_length"] is None
    # Pinned rows: every timed step verified the pinned choice, and accepted exactly what the
    # simulator says that fixed configuration accepts; the pinned chain as the chain's own engine.
    for n in (1, 2):
        for p in ("chain", "4"):
            x = by[f"DDTREE-auto={p}", n]
            assert x["pinned"] == p and "failed" not in x and x["outputs_ok"], x
            assert {k for k, v in x["choices"].items() if v} == {p}
            assert sum(x["choices"].values()) == x["timed"]["steps"] >= 1
            assert x["sim_agrees"] is True and x["accept_length"] == x["sim_accept_length"]
        assert by["DDTREE-auto=chain", n]["accept_length"] == by["DDTREE-chain", n]["accept_length"]
        assert by["DDTREE-auto=chain", n]["accept_length_per_request"] == by["DDTREE-chain", n]["accept_length_per_request"]
    assert [v["concurrency"] for v in meta["auto_verdicts"]] == [1, 2]
    assert all(v["best"] in ("DDTREE-chain", "DDTREE-auto=chain", "DDTREE-auto=4") for v in meta["auto_verdicts"])
    # One [replay] line per row, the markdown table, and the plot skipped or written.
    assert sum(line.startswith("[replay] {") for line in r.stdout.splitlines()) == len(rows)
    assert "| DDTREE-auto | 2 |" in r.stdout and "| conc | auto tok/s per request | best fixed |" in r.stdout
    assert (tmp_path / "replay.png").exists() or "matplotlib is not importable" in r.stdout
    # --report: the table again from the file, nothing run.
    again = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "replay_bench.py"), "--report",
                            str(out)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "| DDTREE-chain | 1 |" in again.stdout, again.stderr[-2000:]


def test_replay_bench_refuses_before_any_engine(tmp_path):
    """A misspelt configuration, DDTREE-auto without a step-cost table, or a missing trace stop
    the run before any engine starts (and write nothing)."""
    script = str(ROOT / "benchmark" / "ddtree" / "replay_bench.py")
    trace = tmp_path / "t.pt"
    trace.write_bytes(b"")
    base = [sys.executable, script, "--trace", str(trace), "--target-path", str(tmp_path), "--drafter-path",
            str(tmp_path), "--out", str(tmp_path / "r.json")]
    for args, msg in ((["--configs", "no-spec", "DFLASHH"], "unknown configuration"),
                      (["--configs", "DDTREE-chain", "DDTREE-auto"], "needs --auto-table"),
                      (["--configs", "DFLASH", "--max-concurrency", "DDTREE-16=4"], "not in --configs"),
                      (["--configs", "DDTREE-16", "--pin", "chain"], "add DDTREE-auto")):
        r = subprocess.run(base + args, capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and msg in r.stderr, r.stderr[-2000:]
    r = subprocess.run(base[:2] + ["--trace", str(tmp_path / "missing.pt")] + base[4:], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0 and "no such file" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "r.json").exists()


def test_auto_verdicts_and_the_table(tmp_path):
    """Budget auto against the best fixed DDTREE configuration by tokens/s per request, within
    the larger timed-round spread of the two; ratios to DFLASH and to no speculation."""
    sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))
    import replay_bench as rb

    def row(cfg, c, tps, rounds=None, acc=1.0):
        return dict(config=cfg, concurrency=c, tok_s_per_request=tps, tok_s_total=tps * c, accept_length=acc,
                    sim_accept_length=acc, sim_agrees=True, tok_s_per_request_rounds=rounds or [tps])

    rows = [row("no-spec", 4, 20.0), row("DFLASH", 4, 40.0), row("DDTREE-chain", 4, 44.0, [43.0, 44.0, 45.0]),
            row("DDTREE-16", 4, 50.0, [49.0, 50.0, 51.0]), row("DDTREE-auto", 4, 49.0, [48.0, 49.0, 50.0])]
    (v,) = rb.auto_verdicts(rows)
    assert v["best"] == "DDTREE-16" and round(v["gap"], 4) == -0.02 and round(v["noise"], 4) == round(2 / 49, 4) and v["ok"]
    rows[-1] = row("DDTREE-auto", 4, 45.0, [44.9, 45.0, 45.1])
    (v,) = rb.auto_verdicts(rows)
    assert not v["ok"]  # 10% behind, the spread 4%
    md = rb.markdown(rows)
    assert "| DDTREE-16 | 4 | 50.00 | 1.25x | 2.50x |" in md
    assert rb.problems([dict(row("DDTREE-16", 1, 1.0), sim_agrees=False)], {}) == [
        "DDTREE-16 @ 1: accept length 1.0 measured, 1.0 simulated"]
    # --report over several calls' outputs: rows together, a later file's row replacing an earlier one's.
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"meta": {"trace": "t.pt"}, "rows": rows[:3]}))
    b.write_text(json.dumps({"meta": {"trace": "t.pt"}, "rows": [row("DDTREE-chain", 4, 46.0)] + rows[3:]}))
    m = rb.merged_outputs([a, b])
    assert [(x["config"], x["tok_s_per_request"]) for x in m["rows"]] == [
        ("no-spec", 20.0), ("DFLASH", 40.0), ("DDTREE-chain", 46.0), ("DDTREE-16", 50.0), ("DDTREE-auto", 45.0)]
    assert m["meta"] == {"trace": "t.pt", "from": [str(a), str(b)]}
    one = tmp_path / "a.DDTREE-64.json"  # a configuration's own file (its sweep cut before the end): a list
    one.write_text(json.dumps([row("DDTREE-64", 4, 30.0)]))
    m = rb.merged_outputs([a, one])
    assert [x["config"] for x in m["rows"]] == ["no-spec", "DFLASH", "DDTREE-chain", "DDTREE-64"]


def test_pins_name_choices_of_the_table(tmp_path):
    """--pin takes 'chain' and budgets of --auto-table, each once, and needs DDTREE-auto."""
    sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))
    import replay_bench as rb

    table = tmp_path / "t.json"
    table.write_text(json.dumps({"meta": {}, "rows": [
        dict(config=c, concurrency=1, ms_per_step=1.0) for c in ("DDTREE-chain", "DDTREE-16", "DDTREE-64")]}))
    rb.sc.check_pins([], ["DFLASH"], None, rb.PROG)  # nothing pinned: nothing to check
    rb.sc.check_pins(["chain", "16", "64"], ["DFLASH", "DDTREE-auto"], [table], rb.PROG)
    for pins, msg in ((["32"], r"\[16, 64\]"), (["16", "16"], "each once"), (["sixteen"], "a budget")):
        with pytest.raises(SystemExit, match=msg):
            rb.sc.check_pins(pins, ["DDTREE-auto"], [table], rb.PROG)
    with pytest.raises(SystemExit, match="add DDTREE-auto"):
        rb.sc.check_pins(["16"], ["DDTREE-16"], [table], rb.PROG)
