"""The benchmark scripts stay runnable: each one's CPU smoke mode runs to the end and writes the
fields the RESULTS.md tables read (a benchmark that cannot run is found here, not on the GPU)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))  # the scripts' own modules, for the unit tests


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU smoke mode (the GPU runs the real sweep)")
def test_bench_gdn_tree_smoke(tmp_path):
    out = tmp_path / "gdn.json"
    env = dict(os.environ, TRITON_INTERPRET="1")  # before triton is imported: a child process
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "bench_gdn_tree.py"), "--smoke",
                        "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert {(x["bs"], x["budget"]) for x in rows} == {(1, 8), (2, 8), (1, "chain16"), (2, "chain16")}
    for x in rows:
        timed = [k for k in x if k.endswith("_ms_48")]
        assert {"ours_ms_48", "ours_split_ms_48", "ours_conv_only_ms_48", "ours_commit_ms_48"} <= set(timed)
        assert any(k.startswith("gdn_") for k in timed)  # the variants
        assert all(math.isfinite(x[k]) and x[k] > 0 for k in timed), x


def test_bench_gdn_tree_defaults_only(tmp_path):
    """``--defaults-only``: per cell ours as the engine runs it, none of the A/B timings (measured:
    with them a 27B cell took ~100 s and the upstream cells did not fit the call)."""
    out = tmp_path / "gdn.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "bench_gdn_tree.py"), "--smoke",
                        "--cases", "2x8", "--defaults-only", "--alt-impls", "--variants", "split:32:16",
                        "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = json.loads(out.read_text())["rows"]
    timed = {k for k in row if k.endswith("_ms_48")}
    assert {"ours_ms_48", "ours_gdn_only_ms_48", "ours_conv_only_ms_48", "ours_commit_ms_48"} <= timed
    assert not timed & {"ours_eager_ms_48", "ours_gdn_only_fp32acc_ms_48", "ours_conv_flat_ms_48",
                        "ours_commit_path6_ms_48", "ours_commit_eager_ms_48"}, timed
    assert all(math.isfinite(row[k]) and row[k] > 0 for k in timed), row


def test_bench_gdn_tree_cases():
    """``--cases`` picks single cells of the kernel table (the rest of a sweep costs device time)."""
    import bench_gdn_tree as bg

    assert bg._parse_case("4x64") == (4, 64, False)
    assert bg._parse_case("16XCHAIN") == (16, 15, True)
    for bad in ("4", "x64", "4x", "0x64", "4x0", "4xtree", "ax64"):
        with pytest.raises(SystemExit, match="BSxB"):
            bg._parse_case(bad)


@pytest.mark.skipif(__import__("sglang_ddtree.compat.releases", fromlist=["RELEASE"]).RELEASE != "0.5.17",
                    reason="bench_gdn_tree times sglang 0.5.17's tree GatedDeltaNet kernels (the measured release; "
                           "0.5.23 moved them)")
def test_bench_gdn_tree_upstream_conv_cap(monkeypatch):
    """Upstream's cell: its GDN kernel timed alone beside the conv + GDN pair, and only alone above
    ``--upstream-conv-max-nodes`` (its tree conv compiles unrolled over the nodes: at 257 nodes not
    within ~400 s on the H200). Upstream's kernels do not run on the Triton interpreter, so this
    checks the cell's bookkeeping with recorders in their place."""
    import sglang.kernels.ops.attention.fla.fused_sigmoid_gating_recurrent as up_gdn
    import sglang.kernels.ops.mamba.causal_conv1d_triton as up_conv

    import bench_gdn_tree as bg

    calls, parents = [], []

    def gdn(**kw):
        calls.append("gdn")
        parents.append(kw["retrieve_parent_token"].clone())

    monkeypatch.setattr(up_gdn, "fused_sigmoid_gating_delta_rule_update", gdn)
    monkeypatch.setattr(up_conv, "causal_conv1d_update", lambda *a, **kw: calls.append("conv"))
    tiny = dict(H=1, HV=2, K=16, V=16, KW=4)
    capped = bg.run_case(2, 8, tiny, "cpu", 1, True, ours_on=False, extras=False, upstream_conv_max_nodes=8)
    assert capped["nodes"] == 9 and "conv" not in calls and calls.count("gdn") == 4  # 3 warm-ups + 1 timed
    assert "upstream_ms_48" not in capped and capped["upstream_gdn_only_ms_48"] > 0
    assert "9 nodes > --upstream-conv-max-nodes 8" in capped["upstream_conv_skipped"]
    # Timed alone (no conv before it to write them), the GDN kernel still gets every node's parent.
    lay = bg._tree_layout(2, 8)
    assert all(torch.equal(p[:, 1:], lay.parent[:, 1:]) for p in parents) and len(parents) == 4
    calls.clear()
    full = bg.run_case(2, 8, tiny, "cpu", 1, True, ours_on=False, extras=False, upstream_conv_max_nodes=9)
    assert calls.count("conv") == 4 and calls.count("gdn") == 8  # alone, then with the conv
    assert full["upstream_ms_48"] > 0 and full["upstream_gdn_only_ms_48"] > 0 and "upstream_conv_skipped" not in full
    assert bg.run_case(2, 8, tiny, "cpu", 1, False, ours_on=False).keys() == {"bs", "budget", "nodes",
                                                                            "ours_extra_mib_per_req"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU smoke mode (the GPU runs the real sweep)")
def test_step_cost_smoke_with_the_tiny_pair(tmp_path):
    """One sweep, each configuration in its own process: DDTREE-only arguments reach DDTREE only
    (a DDTREE flag given to the no-spec engine would fail its launch); --max-concurrency caps;
    --config-arg reaches its one configuration; --profile; DDTREE-auto serves with the budget
    policy over --auto-table merged with the rows this sweep measured before it (the chain
    measured here replaces the given table's; budget 16 only in the given table); --pin: its
    engine then serves budget 16 and the chain pinned, each for a row of its own."""
    from sglang_ddtree.testing import tiny_models

    given = tmp_path / "earlier.json"
    given.write_text(json.dumps({"meta": {}, "rows": [
        {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 99.0},
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 1.0}]}))
    out = tmp_path / "sc.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "step_cost.py"),
                        "--target-path", str(tiny_models.model_path("llama")),
                        "--drafter-path", str(tiny_models.model_path("dflash-llama")),
                        "--configs", "no-spec", "DDTREE-chain", "DDTREE-auto", "--concurrency", "1", "2",
                        "--max-concurrency", "DDTREE-chain=1",
                        "--max-concurrency", "DDTREE-auto=1", "--decode-tokens", "8", "--profile",
                        "--config-arg", "DDTREE-chain:speculative_ddtree_max_depth=7",
                        "--prompt-len", "8", "--ddtree-arg", "speculative_ddtree_topk=2", "--auto-table", str(given),
                        "--pin", "16", "chain", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    d = json.loads(out.read_text())
    assert "failed" not in d["meta"], d["meta"]
    # --max-concurrency: the capped configurations run (and size their engines) at 1 only.
    assert [(x["config"], x["concurrency"]) for x in d["rows"]] == [
        ("no-spec", 1), ("no-spec", 2), ("DDTREE-chain", 1), ("DDTREE-auto", 1), ("DDTREE-auto=16", 1),
        ("DDTREE-auto=chain", 1)]
    assert d["meta"]["over_cap"] == {"DDTREE-chain": [2], "DDTREE-auto": [2]}
    assert {x["config"]: x["max_running_requests"] for x in d["rows"]} == {
        "no-spec": 2, "DDTREE-chain": 1, "DDTREE-auto": 1, "DDTREE-auto=16": 1, "DDTREE-auto=chain": 1}
    # (A time, not asserted positive: on a busy CPU the prefill-only pass can outlast the decode.)
    assert all(math.isfinite(x["ms_per_step"]) and x["steps"] >= 1 for x in d["rows"])
    assert d["meta"]["ddtree_args"] == {"speculative_ddtree_topk": 2}
    assert d["meta"]["config_args"] == {"DDTREE-chain": {"speculative_ddtree_max_depth": 7}}
    # What the timed DDTREE steps did (auto: the choice of each, the chain: its steps; none for no-spec).
    rows = {x["config"]: x for x in d["rows"]}
    assert "timed" not in rows["no-spec"]
    assert rows["DDTREE-chain"]["timed"]["steps"] >= 1
    # --profile: per decode step by op from two traced passes (CPU: "cpu_op" events), untimed.
    for x in d["rows"]:
        prof = x["profile"]
        # (Host time differenced between two passes: on a busy CPU it can come out non-positive,
        # and then the summary must say it measured nothing.)
        assert prof["kind"] == "cpu_op" and prof["top"] and (prof["ms_per_step"] > 0 or "noise" in prof), prof
        assert prof["decode_steps"][0] < prof["decode_steps"][1] <= 7, prof
    assert d["meta"]["auto_table"] == {"given": [str(given)], "merged": "sc.auto-table.json"}
    merged = json.loads((tmp_path / "sc.auto-table.json").read_text())["rows"]
    here = {(x["config"], x["concurrency"]): x["ms_per_step"] for x in d["rows"]
            if not x["config"].startswith("DDTREE-auto")}
    assert {(x["config"], x["concurrency"], x["ms_per_step"]) for x in merged} == \
        {("DDTREE-16", 1, 1.0)} | {(c, n, ms) for (c, n), ms in here.items()}
    auto = rows["DDTREE-auto"]["timed"]
    assert sum(v for k, v in auto.items() if k.startswith("choice_")) == auto["steps"] >= 1, auto
    for pin in ("16", "chain"):  # every timed step of a pinned row verified its choice
        x = rows[f"DDTREE-auto={pin}"]
        assert x["pinned"] == pin and "failed" not in x, x
        assert {k: v for k, v in x["timed"].items() if k.startswith("choice_")} == {f"choice_{pin}": x["timed"]["steps"]}


@pytest.mark.parametrize("spec,msg", [("DFLASH", "CONFIG=N"), ("DFLASH=0", "CONFIG=N"), ("DFLASH=x", "CONFIG=N"),
                                      ("DDTREE-16=4", "not in --configs")])
def test_step_cost_rejects_bad_caps(tmp_path, spec, msg):
    """A malformed --max-concurrency, or one naming a configuration outside the sweep (a typo that
    would cap nothing), stops the sweep before any engine starts."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "step_cost.py"), "--target-path",
                        str(tmp_path), "--configs", "no-spec", "DFLASH", "--max-concurrency", spec,
                        "--out", str(tmp_path / "sc.json")], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and msg in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "sc.json").exists()


def test_step_cost_keeps_rows_measured_before_a_failure(tmp_path):
    """A configuration whose process fails or times out after saving rows (an engine
    whose shutdown outlasted the case limit) keeps them, with the failure saying so; one that
    saved nothing is a plain failure; a clean exit with rows is no failure."""
    import step_cost as sc

    saved = tmp_path / "one.json"
    assert sc.collect_child("timeout", saved) == ([], "timeout")
    assert sc.collect_child(0, saved) == ([], 0)  # exited cleanly, measured nothing: still a failure
    row = {"config": "DDTREE-chain", "concurrency": 64, "ms_per_step": 125.8}
    saved.write_text(json.dumps([row]))
    assert sc.collect_child("timeout", saved) == ([row], "timeout after 1 measured row(s)")
    assert sc.collect_child(-9, saved) == ([row], "-9 after 1 measured row(s)")
    assert sc.collect_child(0, saved) == ([row], None)


def test_step_cost_repeat_labels():
    """``CONFIG@N`` runs CONFIG again in an engine of its own (the spread between engines); the
    label is checked before any engine starts."""
    import step_cost as sc

    assert sc.spec_kwargs("DDTREE-chain@2", "d") == sc.spec_kwargs("DDTREE-chain", "d")
    assert sc.spec_kwargs("DDTREE-16@3", "d")["speculative_ddtree_budget"] == 16
    assert sc.spec_kwargs("no-spec@2", "d") == {}
    for bad in ("DDTREE-16@1", "DDTREE-16@x", "DDTREE-16@"):
        with pytest.raises(ValueError, match="CONFIG@N"):
            sc.spec_kwargs(bad, "d")


@pytest.mark.parametrize("cfg,msg", [("DDTREE-16@x", "CONFIG@N"), ("DFLASHH", "unknown configuration")])
def test_step_cost_rejects_bad_configs(tmp_path, cfg, msg):
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "step_cost.py"), "--target-path",
                        str(tmp_path), "--configs", "no-spec", cfg, "--out", str(tmp_path / "sc.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and msg in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "sc.json").exists()


def test_step_cost_auto_needs_budget_rows_before_any_engine(tmp_path):
    """DDTREE-auto without a DDTREE-<budget> row to choose from (none listed before it, no
    --auto-table) stops the sweep before any engine starts; --auto-table is read up front."""
    import step_cost as sc

    sc.check_auto_table(["DDTREE-chain", "DDTREE-16", "DDTREE-auto"], None)
    sc.check_auto_table(["no-spec", "DFLASH"], None)
    with pytest.raises(SystemExit, match="list a DDTREE-<budget>"):
        sc.check_auto_table(["DDTREE-chain", "DDTREE-auto", "DDTREE-16"], None)
    with pytest.raises(SystemExit, match="list a DDTREE-<budget>"):
        sc.check_auto_table(["DDTREE-chain", "DDTREE-chain@2", "DDTREE-auto@2"], None)
    table = tmp_path / "t.json"
    with pytest.raises(SystemExit, match="not a step-cost table"):
        sc.check_auto_table(["DDTREE-auto"], table)  # missing
    table.write_text(json.dumps({"meta": {}, "rows": [{"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 20.0}]}))
    with pytest.raises(SystemExit, match="no DDTREE-<budget> rows"):
        sc.check_auto_table(["DDTREE-auto"], table)
    # A chain-only table is enough when this sweep measures a budget before auto (the merge puts
    # that row beside the table's; a call was refused for this at first).
    sc.check_auto_table(["DDTREE-16", "DDTREE-8", "DDTREE-auto"], table)
    with pytest.raises(SystemExit, match="no DDTREE-<budget> rows"):
        sc.check_auto_table(["DDTREE-auto", "DDTREE-16"], table)
    table.write_text(json.dumps({"meta": {}, "rows": [{"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 22.0}]}))
    sc.check_auto_table(["DDTREE-chain", "DDTREE-auto"], table)
    # The command line: refused before an engine (or even the model folder) is touched.
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "step_cost.py"), "--target-path",
                        str(tmp_path), "--configs", "DDTREE-chain", "DDTREE-auto", "--out", str(tmp_path / "sc.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "--auto-table PATH" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "sc.json").exists()


def test_step_cost_merges_the_given_auto_table_with_its_own_rows(tmp_path):
    """With --auto-table, auto's table is the given rows with this call's rows in place of the same
    (configuration, concurrency); budgets only the given table has stay candidates."""
    import step_cost as sc
    from sglang_ddtree.core.budget_policy import StepCostTable

    given = tmp_path / "earlier.json"
    given.write_text(json.dumps({"meta": {}, "rows": [
        {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 20.0},
        {"config": "DDTREE-chain", "concurrency": 64, "ms_per_step": 130.0},
        {"config": "DDTREE-8", "concurrency": 1, "ms_per_step": 21.0},
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 22.0}]}))
    mine = [{"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 19.0},
            {"config": "DDTREE-chain@2", "concurrency": 1, "ms_per_step": 19.5},
            {"config": "DDTREE-64", "concurrency": 1, "ms_per_step": 25.0}]
    path = sc.merge_auto_table(given, mine, tmp_path / "sc.json")
    assert path == tmp_path / "sc.auto-table.json"
    t = StepCostTable.from_json(path)
    assert t.budgets() == [8, 16, 64] and t.has_chain()
    assert t.cost("chain", 1) == 19.0  # this call's row, not the earlier one
    assert t.cost("chain", 64) == 130.0  # only the earlier table has it
    assert t.cost(64, 1) == 25.0 and t.cost(8, 1) == 21.0
    # Several given tables (a sweep spread over calls): merged in order, a later table's row in
    # place of an earlier one's, this call's rows over both.
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"meta": {}, "rows": [
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 23.5},
        {"config": "DDTREE-128", "concurrency": 1, "ms_per_step": 30.0}]}))
    t2 = StepCostTable.from_json(sc.merge_auto_table([given, later], mine, tmp_path / "sc.json"))
    assert t2.budgets() == [8, 16, 64, 128] and t2.cost(16, 1) == 23.5 and t2.cost("chain", 1) == 19.0
    sc.check_auto_table(["DDTREE-auto"], [later])
    chain_only = tmp_path / "chain-only.json"
    chain_only.write_text(json.dumps({"meta": {}, "rows": [{"config": "DDTREE-chain", "concurrency": 1,
                                                            "ms_per_step": 20.0}]}))
    sc.check_auto_table(["DDTREE-auto"], [chain_only, later])  # the budgets of any table count
    with pytest.raises(SystemExit, match="no DDTREE-<budget> rows"):
        sc.check_auto_table(["DDTREE-auto"], [chain_only])
    with pytest.raises(SystemExit, match="missing.json: not a step-cost table"):
        sc.check_auto_table(["DDTREE-auto"], [later, tmp_path / "missing.json"])


def test_auto_verdict_against_the_best_fixed_choice_and_noise(tmp_path):
    """auto_verdict.py compares auto with the cheapest fixed choice per concurrency (ms per
    committed token) and calls a gap noise only within the larger of the rounds' spread and the
    spread between engines of one configuration; without repeats it gives no noise verdict."""
    import auto_verdict as av

    def row(cfg, c, ms, rounds=None, tps=1.0):
        return dict(config=cfg, concurrency=c, ms_per_step=ms, tokens_per_step=tps,
                    **({"ms_per_step_rounds": rounds} if rounds else {}))

    rows = [row("DDTREE-16", 4, 24.10, [24.29, 24.10, 24.10]),
            row("DDTREE-chain", 4, 23.42, [23.59, 23.37, 23.42]),
            row("DDTREE-auto", 4, 24.23, [24.46, 24.23, 23.68])]
    (v,) = av.verdicts(rows)
    assert v["best"] == "DDTREE-chain" and v["between_engines_spread"] is None
    assert "no verdict on noise" in v["verdict"] and abs(v["gap"] - (24.23 / 23.42 - 1)) < 1e-4
    # Repeats: chain engines 23.42 and 24.30 (3.7% apart) make the 3.5% gap noise ...
    (v,) = av.verdicts(rows + [row("DDTREE-chain@2", 4, 24.30), row("DDTREE-auto@2", 4, 24.20)])
    assert v["repeated"] == ["DDTREE-auto", "DDTREE-chain"] and v["verdict"].startswith("within noise")
    assert v["best_ms_per_token"] == round((23.42 + 24.30) / 2, 3)
    # ... engines 0.1% apart do not.
    (v,) = av.verdicts(rows + [row("DDTREE-chain@2", 4, 23.44)])
    assert v["verdict"].startswith("slower by") and "beyond the noise" in v["verdict"]
    # Cost per committed token: a tree that commits more per step can be the best fixed choice.
    (v,) = av.verdicts([row("DDTREE-chain", 1, 20.0, tps=1.1), row("DDTREE-16", 1, 21.0, tps=1.3),
                        row("DDTREE-auto", 1, 21.0, tps=1.3)])
    assert v["best"] == "DDTREE-16" and v["verdict"] == "not slower"
    # The CLI: tables and per-configuration files; no auto row is an error.
    t = tmp_path / "sc.json"
    t.write_text(json.dumps({"meta": {}, "rows": rows}))
    out = tmp_path / "v.md"
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "auto_verdict.py"), str(t), "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "DDTREE-chain" in out.read_text(), r.stderr
    t.write_text(json.dumps(rows[:2]))
    r = subprocess.run([sys.executable, str(ROOT / "benchmark" / "ddtree" / "auto_verdict.py"), str(t)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "no concurrency" in r.stderr


def test_step_cost_device_facts_come_from_a_process_of_their_own():
    """The sweep's parent asks a child for the device name and copy bandwidth, so it holds no GPU
    memory beside the engines (4.5 GiB kept in the parent ran 64-request verify
    graph captures out of memory). Without a GPU: the CPU and no bandwidth."""
    import step_cost as sc
    import torch

    facts = sc.device_facts(True)
    if torch.cuda.is_available():
        assert facts["device"] == torch.cuda.get_device_name() and facts["copy_bandwidth_gbs"] > 0
    else:
        assert facts == {"device": "cpu", "copy_bandwidth_gbs": None}
    assert sc.device_facts(False)["copy_bandwidth_gbs"] is None


def test_phase_ms_per_step_from_the_timed_differences():
    import step_cost

    timed = {"steps": 10, "phase_steps": 10, "phase_ms_verify": 150.0, "phase_ms_draft": 12.5}
    assert step_cost.phase_ms_per_step(timed) == {"verify": 15.0, "draft": 1.25}
    assert step_cost.phase_ms_per_step({"steps": 10}) is None


def test_step_cost_config_args_apply_to_one_label():
    import step_cost as sc

    got = sc.parse_config_args(['DDTREE-16@2:speculative_ddtree_tree_attention="backend"', "DFLASH:page_size=16"],
                               ["DFLASH", "DDTREE-16", "DDTREE-16@2"])
    assert got == {"DDTREE-16@2": {"speculative_ddtree_tree_attention": "backend"}, "DFLASH": {"page_size": 16}}
    # A child process measures one configuration and is given the sweep's items.
    assert sc.parse_config_args(['DDTREE-16@2:page_size=16', "DFLASH:page_size=16"], ["DFLASH"], child=True) \
        == {"DFLASH": {"page_size": 16}}
    for bad in ["DDTREE-32:page_size=16", "DFLASH page_size=16", "DFLASH:=1"]:
        with pytest.raises(SystemExit, match="--config-arg"):
            sc.parse_config_args([bad], ["DFLASH", "DDTREE-16"])


def test_step_cost_config_env_sets_plugin_variables_of_one_label():
    import step_cost as sc

    got = sc.parse_config_env(["DDTREE-15@2:SGLANG_DDTREE_STEP_STATS_KERNEL=1"], ["DDTREE-15", "DDTREE-15@2"])
    assert got == {"DDTREE-15@2": {"SGLANG_DDTREE_STEP_STATS_KERNEL": "1"}}
    for bad, what in [("DDTREE-32:SGLANG_DDTREE_STEP_STATS_KERNEL=1", "not among"), ("DDTREE-15:PATH=/x", "not a variable"),
                      ("DDTREE-15 SGLANG_DDTREE_STEP_STATS_KERNEL=1", "expected")]:
        with pytest.raises(SystemExit, match=what):
            sc.parse_config_env([bad], ["DDTREE-15"])


def test_step_cost_pin_needs_the_table_before_any_engine(tmp_path):
    """--pin serves budgets of --auto-table in DDTREE-auto's engine: without the table, or naming
    a budget the table lacks, the sweep stops before any engine starts."""
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"meta": {}, "rows": [{"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 1.0}]}))
    base = [sys.executable, str(ROOT / "benchmark" / "ddtree" / "step_cost.py"), "--target-path", str(tmp_path),
            "--drafter-path", str(tmp_path), "--out", str(tmp_path / "o.json"), "--configs", "DDTREE-16", "DDTREE-auto"]
    for extra, msg in ((["--pin", "16"], "--pin needs --auto-table"),
                       (["--pin", "32", "--auto-table", str(table)], "a budget of --auto-table [16]")):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and msg in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "o.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU smoke mode (the GPU runs the real sweep)")
def test_bench_skinny_gemm_smoke(tmp_path):
    out = tmp_path / "skinny.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    bench = [sys.executable, str(ROOT / "benchmark" / "ddtree" / "bench_skinny_gemm.py"), "--smoke", "--m", "17"]
    r = subprocess.run(bench + ["--tp", "5", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--tp: tp 5 does not split this model" in r.stderr and not out.exists(), r.stderr[-2000:]
    r = subprocess.run(bench + ["--tp", "2", "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(out.read_text())
    assert d["meta"]["tp"] == 2  # each rank's slice, widths / 64 in the smoke mode
    assert {x["shape"]: x["n"] for x in d["rows"]}["mlp_gate_up"] == 2 * 17408 // 2 // 64
    assert len(d["rows"]) == 9 and [x["shape"] for x in d["rows"] if x["act"]] == ["mlp_down"] and {x["shape"] for x in d["rows"]} >= {"mlp_gate_up", "lm_head"}
    for x in d["rows"]:
        assert x["cublas_us"] > 0 and x["best_us"] > 0 and x["best_rel_err"] < 2e-2, x
    (seq,) = d["sequence"]
    assert seq["m"] == 17 and seq["weight_gb"] > 0
    assert all(seq[k] > 0 for k in ("cublas_ms", "best_ms", "best_silu_fused_ms")), seq


def test_linear_shapes_per_tensor_parallel_rank():
    """Qwen3.6-27B's products as one rank of --tp-size 1 / 2 / 8 holds them (sglang's sharding:
    column-parallel N / tp, row-parallel K / tp, key / value heads replicated past 4 ranks, the
    vocabulary padded to 64 then split); a size that does not split the model is refused."""
    sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))
    from qwen36_shapes import shapes, target_config
    from sglang_ddtree.testing.skinny_tables import qwen35_linear_shapes

    cfg = target_config(shapes())
    one = qwen35_linear_shapes(cfg)
    assert one == qwen35_linear_shapes(cfg, 1) and one["attn_qkv_proj"] == (14336, 5120)
    two, eight = qwen35_linear_shapes(cfg, 2), qwen35_linear_shapes(cfg, 8)
    for name in ("gdn_in_proj_qkvz", "gdn_in_proj_ba", "mlp_gate_up", "lm_head", "attn_qkv_proj"):
        assert two[name] == (one[name][0] // 2, 5120), name
    for name in ("gdn_out_proj", "attn_o_proj", "mlp_down"):
        assert two[name] == (5120, one[name][1] // 2) and eight[name] == (5120, one[name][1] // 8), name
    # 24 query heads (with the output gate's rows) / 8 = 3; 4 key / value heads -> one per rank
    assert eight["attn_qkv_proj"] == (2 * 3 * 256 + 2 * 256, 5120) and eight["lm_head"] == (248320 // 8, 5120)
    for bad in (0, 3, 5, 16):
        with pytest.raises(ValueError, match=f"tp {bad} does not split"):
            qwen35_linear_shapes(cfg, bad)


def test_ship_gemm_table_merges_one_gpus_tables_into_the_shipped_file(tmp_path):
    """The later input's row wins for a shared (m, n, k, act); the per-tiling sweep is dropped; the
    file is named after the GPU and loads for it; inputs of two GPUs are refused."""
    import ship_gemm_table as sg

    from sglang_ddtree.kernels import gemm_table as gt

    def bench(device, rows):
        return dict(meta=dict(device=device, torch="x"), rows=rows)

    row = dict(m=16, shape="mlp_down", n=8, k=64, act=None, best="bn64_bk64_sk1_st2_w4", best_vs_cublas=0.99,
               configs={"bn64_bk64_sk1_st2_w4": 1.0}, cublas_us=2.0, best_us=1.98)
    a = tmp_path / "a.json"
    a.write_text(json.dumps(bench("NVIDIA X", [row, dict(row, m=17)])))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(bench("NVIDIA X", [dict(row, best_vs_cublas=0.9)])))
    out = sg.main([str(a), str(b), "--out-dir", str(tmp_path / "tables")])
    assert out == tmp_path / "tables" / "nvidia_x.json"
    shipped = json.loads(out.read_text())
    assert [(r["m"], r["best_vs_cublas"]) for r in shipped["rows"]] == [(16, 0.9), (17, 0.99)]
    assert "configs" not in shipped["rows"][0] and shipped["meta"]["sources"] == [str(a), str(b)]
    assert gt.load_table(out, "NVIDIA X") == {(16, 8, 64, None): gt.Config.from_name("bn64_bk64_sk1_st2_w4")}
    b.write_text(json.dumps(bench("NVIDIA Y", [row])))
    with pytest.raises(SystemExit, match="different GPUs"):
        sg.main([str(a), str(b), "--out-dir", str(tmp_path)])
