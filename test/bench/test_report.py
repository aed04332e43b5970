"""benchmark/ddtree/report.py: the projection divides tokens per forward by ms per step, the
ratio is taken against DFLASH at the same concurrency (else the chain), rows stopped before their JSON are read
from the log, and missing cells render as a dash (never a made-up number)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report():
    sys.path.insert(0, str(ROOT / "benchmark" / "ddtree"))  # its sibling step_cost.py
    spec = importlib.util.spec_from_file_location("ddtree_report", ROOT / "benchmark" / "ddtree" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _accept_row(tokens, steps, hist):
    return {"sets": {"a": {"completion_tokens": tokens, "verify_steps": steps, "accept_histogram": hist}}}


def _run(report, tmp_path, sc, acc, extra=()):
    """Write the step-cost and acceptance inputs, run the report, return ``(rows by (config,
    concurrency), markdown)``."""
    (tmp_path / "sc.json").write_text(json.dumps(sc))
    (tmp_path / "acc.json").write_text(json.dumps(acc))
    assert report.main(["--step-cost", str(tmp_path / "sc.json"), *extra, "--accept", str(tmp_path / "acc.json"),
                        "--out", str(tmp_path / "r")]) == 0
    rows = {(r["config"], r["concurrency"]): r for r in json.loads((tmp_path / "r.json").read_text())["rows"]}
    return rows, (tmp_path / "r.md").read_text()


def test_projection_table_and_files(report, tmp_path):
    sc = {"meta": {"device": "GPU", "floor_ms_target": 10.0}, "rows": [
        {"config": "DFLASH", "concurrency": 1, "ms_per_step": 20.0},
        {"config": "DDTREE-32", "concurrency": 1, "ms_per_step": 25.0},
        {"config": "DFLASH", "concurrency": 4, "ms_per_step": 40.0}]}
    (tmp_path / "sc.log").write_text('noise\n[step_cost] {"config": "DDTREE-32", "concurrency": 4, "ms_per_step": 50.0}\n')
    acc = {"meta": {"target": "T", "drafter": "D", "sets": ["a"]}, "rows": {
        "no-spec": _accept_row(10, 0, None), "DFLASH": _accept_row(30, 20, [12, 6, 2]),
        "DDTREE-32": _accept_row(40, 20, [5, 10, 5]), "DDTREE-64": _accept_row(42, 20, [4, 10, 6])}}
    rows, md = _run(report, tmp_path, sc, acc, extra=("--step-cost-log", str(tmp_path / "sc.log")))
    assert rows[("DFLASH", 1)]["tokens_per_s"] == pytest.approx(1.5 / 20 * 1e3)
    assert rows[("DDTREE-32", 1)]["vs_dflash"] == pytest.approx((2.0 / 25) / (1.5 / 20))
    assert rows[("DDTREE-32", 4)]["ms_per_step"] == 50.0  # from the log
    assert ("DDTREE-64", 1) not in rows  # acceptance without a step cost: no projection
    assert "**Projected**" in md and "| DDTREE-64 | — | — |" in md


def test_chain_takes_dflash_acceptance_and_auto_gets_step_cost_only(report, tmp_path):
    sc = {"meta": {}, "rows": [
        {"config": "DFLASH", "concurrency": 1, "ms_per_step": 20.0},
        {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 22.0},
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 23.0},
        {"config": "DDTREE-auto", "concurrency": 1, "ms_per_step": 66.0}]}
    acc = {"meta": {}, "rows": {"DFLASH": _accept_row(30, 20, [12, 6, 2]), "DDTREE-16": _accept_row(40, 20, [5, 10, 5])}}
    rows, md = _run(report, tmp_path, sc, acc)
    assert rows[("DDTREE-chain", 1)]["tokens_per_s"] == pytest.approx(1.5 / 22 * 1e3)
    assert ("DDTREE-auto", 1) not in rows
    order = [line.split("|")[1].strip() for line in md.splitlines() if line.startswith("| ") and "ms/step" not in line]
    assert order[:4] == ["DFLASH", "DDTREE-chain", "DDTREE-16", "DDTREE-auto"]
    assert "| DDTREE-auto | 66.00 |" in md and "DFLASH's: same drafts" in md


def test_ratio_falls_back_to_the_chain_without_dflash(report, tmp_path):
    """A sweep without a DFLASH row: the ratio is taken against the chain
    through DDTREE's worker (DFLASH's drafts), and the table says so."""
    sc = {"meta": {}, "rows": [
        {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 20.0},
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 25.0}]}
    acc = {"meta": {}, "rows": {"DFLASH": _accept_row(30, 20, [12, 6, 2]), "DDTREE-16": _accept_row(40, 20, [5, 10, 5])}}
    rows, md = _run(report, tmp_path, sc, acc)
    assert rows[("DDTREE-16", 1)]["vs"] == pytest.approx((2.0 / 25) / (1.5 / 20))
    assert rows[("DDTREE-16", 1)]["vs_ref"] == "DDTREE-chain" and "vs_dflash" not in rows[("DDTREE-16", 1)]
    assert "conc 1 (vs DDTREE-chain)" in md and "| DDTREE-16 | 80.0 (1.07x) |" in md


def test_repeated_engines_and_tables_are_averaged_with_their_spread(report, tmp_path):
    """A sweep in parts (the chain as every part's anchor) and ``CONFIG@N`` repeats: the mean of
    the engines, their count and spread beside it; the same row in a table and in its
    per-configuration file counts once."""
    chain1 = {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 20.0, "startup_s": 40.0}
    part1 = {"meta": {}, "rows": [chain1, {"config": "DDTREE-chain@2", "concurrency": 1, "ms_per_step": 21.0},
                                  {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 25.0}]}
    part2 = {"meta": {}, "rows": [{"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 22.0},
                                  {"config": "DDTREE-64", "concurrency": 1, "ms_per_step": 30.0}]}
    (tmp_path / "p2.json").write_text(json.dumps(part2))
    (tmp_path / "p1.chain.json").write_text(json.dumps([chain1]))  # step_cost's per-configuration file
    acc = {"meta": {}, "rows": {"DFLASH": _accept_row(30, 20, [12, 6, 2]), "DDTREE-16": _accept_row(40, 20, [5, 10, 5])}}
    rows, md = _run(report, tmp_path, part1, acc,
                    extra=("--step-cost", str(tmp_path / "sc.json"), str(tmp_path / "p2.json"),
                           str(tmp_path / "p1.chain.json")))
    assert rows[("DDTREE-chain", 1)]["ms_per_step"] == pytest.approx(21.0)  # (20 + 21 + 22) / 3
    assert "| DDTREE-chain | 21.00 (3 engines, spread 9.5%) |" in md
    assert "| DDTREE-16 | 25.00 |" in md and "| DDTREE-64 | 30.00 |" in md
    assert "DDTREE-chain@2" not in md


def test_auto_projection_is_the_policys_choice_with_the_profile_known(report, tmp_path):
    """Budget auto's projected row: the policy's own choice (best_choice, chain margin included)
    with the acceptance profile known, beside the best fixed choice; budgets without acceptance
    are listed as left out, never guessed."""
    sc = {"meta": {}, "rows": [
        {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 20.0},
        {"config": "DDTREE-chain", "concurrency": 4, "ms_per_step": 20.0},
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 22.0},
        {"config": "DDTREE-16", "concurrency": 4, "ms_per_step": 25.0},
        {"config": "DDTREE-64", "concurrency": 1, "ms_per_step": 30.0}]}
    # Chain (DFLASH's drafts) 1.5 tokens per forward, budget 16 2.0, budget 64 unknown.
    acc = {"meta": {}, "rows": {"DFLASH": _accept_row(30, 20, [12, 6, 2]), "DDTREE-16": _accept_row(40, 20, [5, 10, 5])}}
    _, md = _run(report, tmp_path, sc, acc)
    auto = json.loads((tmp_path / "r.json").read_text())["auto_projected"]
    # conc 1: 16 gives 2.0 / 22 ms = 90.9 tok/s vs the chain's 75.0 (+21%): the tree.
    assert auto["1"]["choice"] == "DDTREE-16" and auto["1"]["tokens_per_s"] == pytest.approx(2.0 / 22 * 1e3)
    assert auto["1"]["unknown"] == ["DDTREE-64"] and auto["1"]["vs_best"] == pytest.approx(1.0)
    # conc 4: 2.0 / 25 = 80.0 vs 1.5 / 20 = 75.0 (+6.7%, beyond the 5% margin): still the tree.
    assert auto["4"]["choice"] == "DDTREE-16" and auto["4"]["unknown"] == []
    assert "| 1 | DDTREE-16 | 90.9 | DDTREE-16 | 90.9 | 1.000 | DDTREE-64 |" in md


def test_auto_projection_keeps_the_chain_within_the_margin(report, tmp_path):
    sc = {"meta": {}, "rows": [
        {"config": "DDTREE-chain", "concurrency": 4, "ms_per_step": 20.0},
        {"config": "DDTREE-16", "concurrency": 4, "ms_per_step": 26.2}]}
    acc = {"meta": {}, "rows": {"DFLASH": _accept_row(30, 20, [12, 6, 2]), "DDTREE-16": _accept_row(40, 20, [5, 10, 5])}}
    _run(report, tmp_path, sc, acc)
    auto = json.loads((tmp_path / "r.json").read_text())["auto_projected"]["4"]
    # 2.0 / 26.2 = 76.3 tok/s vs the chain's 75.0: +1.8%, inside the margin -> the chain, 1.8% behind the best.
    assert (auto["choice"], auto["best_fixed"]) == ("DDTREE-chain", "DDTREE-16")
    assert auto["vs_best"] == pytest.approx(75.0 / (2.0 / 26.2 * 1e3))


def test_break_even_acceptance_is_the_step_cost_ratio_to_the_reference(report, tmp_path):
    """Step costs only: budget B must commit ms(B) / ms(DFLASH) times the chain's tokens per step
    to match DFLASH, against the DDTREE chain where DFLASH was not measured; no budget row, no
    ratio (a dash)."""
    sc = {"meta": {}, "rows": [
        {"config": "DFLASH", "concurrency": 1, "ms_per_step": 20.0},
        {"config": "DDTREE-chain", "concurrency": 1, "ms_per_step": 22.0},
        {"config": "DDTREE-chain", "concurrency": 64, "ms_per_step": 130.0},
        {"config": "DDTREE-16", "concurrency": 1, "ms_per_step": 23.0},
        {"config": "DDTREE-16", "concurrency": 64, "ms_per_step": 150.0},
        {"config": "DDTREE-64", "concurrency": 1, "ms_per_step": 25.0}]}
    acc = {"meta": {}, "rows": {"DFLASH": _accept_row(30, 20, [12, 6, 2])}}
    _, md = _run(report, tmp_path, sc, acc)
    even = {(r["config"], r["concurrency"]): r for r in json.loads((tmp_path / "r.json").read_text())["break_even"]}
    assert even[("DDTREE-16", 1)] == {"config": "DDTREE-16", "concurrency": 1, "ratio": pytest.approx(1.15),
                                      "ref": "DFLASH"}
    assert even[("DDTREE-16", 64)]["ratio"] == pytest.approx(150 / 130) and even[("DDTREE-16", 64)]["ref"] == "DDTREE-chain"
    assert ("DDTREE-64", 64) not in even
    assert "| DDTREE-16 | 1.15 | 1.15 (vs DDTREE-chain) |" in md and "| DDTREE-64 | 1.25 | — |" in md
