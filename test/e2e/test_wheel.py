"""The wheel as a user installs it: built from this checkout with ``pip wheel --no-build-isolation``
(what ``scripts/build_wheel.sh`` does), installed into a fresh virtualenv (not the checkout, not
editable; sglang and the rest of the pinned stack reach it through a path entry added after the
install), then checked there: its contents (sources, and with nvcc here the prebuilt CUDA tree
kernels for sm_90 / sm_100 / sm_120 + PTX, loadable), the package and the plugin it imports are
the installed ones, and a tiny DDTREE engine on sglang's CPU engine serves the same tokens as
no speculation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "test" / "harness"
TOOLKIT = shutil.which("nvcc") is not None and torch.version.cuda is not None

_CHILD = r"""
import json, sys
from pathlib import Path

import sglang_ddtree
from sglang_ddtree.kernels import tree_cuda
from sglang_ddtree.testing import tiny_models

out = {"package": sglang_ddtree.__file__, "csrc": str(tree_cuda._CSRC),
       "csrc_found": (tree_cuda._CSRC / "ddtree_tree.cu").exists()}
if (tree_cuda.PREBUILT_DIR / "sglang_ddtree_tree.json").exists():
    mod = tree_cuda._load_prebuilt(tree_cuda.PREBUILT_DIR)
    out["prebuilt_loads"] = mod is not None and hasattr(mod, "build_tree_layout")
    out["prebuilt_archs"] = json.loads((tree_cuda.PREBUILT_DIR / "sglang_ddtree_tree.json").read_text())["archs"]

import sglang as sgl

prompts = [[5, 6, 7, 8, 9], [100, 200, 300], [400]]
common = dict(model_path=str(tiny_models.model_path("llama")), device="cpu", dtype="float32",
              mem_fraction_static=0.3, max_total_tokens=4096, max_running_requests=8,
              disable_overlap_schedule=True, log_level="error")
sp = dict(temperature=0.0, max_new_tokens=16)
runs = {}
for name, extra in (("plain", {}), ("ddtree", dict(
        speculative_algorithm="DDTREE", speculative_ddtree_budget="8",
        speculative_draft_model_path=str(tiny_models.model_path("dflash-llama"))))):
    engine = sgl.Engine(**common, **extra)
    try:
        runs[name] = [o["output_ids"] for o in engine.generate(input_ids=prompts, sampling_params=sp)]
    finally:
        engine.shutdown()
out.update(runs)
import importlib.metadata as md
out["plugin"] = [ep.value for ep in md.entry_points(group="sglang.srt.plugins") if ep.name == "ddtree"]
out["dist_files_in"] = str(md.distribution("sglang-ddtree").locate_file(""))
print("RESULT " + json.dumps(out))
"""


def test_wheel_contents(built_wheel):
    names = set(zipfile.ZipFile(built_wheel).namelist())
    pkg = ROOT / "python"
    want = {str(p.relative_to(pkg)) for p in (pkg / "sglang_ddtree").rglob("*.py")}
    want |= {f"sglang_ddtree/kernels/csrc/{n}" for n in ("ddtree_tree.cu", "ddtree_gdn_commit.cu", "ddtree_step_stats.cu", "ddtree_bind.cpp")}
    assert want <= names, sorted(want - names)
    assert any(n.endswith("entry_points.txt") for n in names)
    prebuilt = {n for n in names if n.startswith("sglang_ddtree/kernels/prebuilt/")}
    if TOOLKIT:
        assert "sglang_ddtree/kernels/prebuilt/sglang_ddtree_tree.json" in prebuilt, sorted(prebuilt)
        assert any(n.endswith(".so") for n in prebuilt), sorted(prebuilt)
        stamp = json.loads(zipfile.ZipFile(built_wheel).read("sglang_ddtree/kernels/prebuilt/sglang_ddtree_tree.json"))
        assert stamp["archs"] == "9.0;10.0;12.0+PTX" and stamp["torch"] == torch.__version__
    assert "-cp312-" in built_wheel.name and "linux_x86_64" in built_wheel.name  # it holds a compiled extension


def test_installed_wheel_serves_ddtree_on_cpu(built_wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(py), "install",
                        "-q", "--no-deps", "--no-index", str(built_wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # The pinned stack from the test environment, after the venv's own site-packages (so the
    # installed sglang_ddtree wins); a .pth line adds the folder without running its .pth files,
    # so the checkout's editable install stays out.
    (site / "zz_pinned_stack.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # (as a user's environment: no test variable, so sglang spawns the engine's children)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SGLANG_DDTREE_TEST_")}
    env.update(PYTHONPATH=str(HARNESS), SGLANG_USE_CPU_ENGINE="1")  # the CPU stand-in for sgl_kernel
    r = subprocess.run([str(py), "-c", _CHILD], capture_output=True, text=True, timeout=900, env=env,
                       cwd=str(tmp_path))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-5000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["package"].startswith(str(site)), res["package"]  # not the checkout
    assert res["csrc_found"] and res["csrc"].startswith(str(site)), res["csrc"]
    assert res["dist_files_in"].startswith(str(site)), res["dist_files_in"]
    assert res["plugin"] == ["sglang_ddtree.plugin:register"]
    if TOOLKIT:
        assert res["prebuilt_loads"] and res["prebuilt_archs"] == "9.0;10.0;12.0+PTX"
    assert len(res["plain"]) == 3 and all(len(o) > 0 for o in res["plain"])
    assert res["ddtree"] == res["plain"]
