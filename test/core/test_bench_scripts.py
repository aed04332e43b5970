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
