"""The CUDA tree kernels build ahead of time on a machine without a GPU (nvcc + the CUDA torch
wheel) for sm_90 and sm_120, and the loader takes such a build only when its stamp matches this
torch and these sources (otherwise it JIT-builds on the GPU host, as before)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from sglang_ddtree.kernels import tree_cuda

_CO = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
needs_toolkit = pytest.mark.skipif(
    shutil.which("nvcc") is None or torch.version.cuda is None or not _CO.exists(),
    reason="needs nvcc, a CUDA build of torch and cuobjdump")


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("prebuilt")
    return out, tree_cuda.build_prebuilt(out)


@needs_toolkit
def test_prebuilt_has_both_targets_and_loads(prebuilt):
    out, lib = prebuilt
    elfs = subprocess.run([str(_CO), "--list-elf", str(lib)], capture_output=True, text=True).stdout
    assert "sm_90" in elfs and "sm_120" in elfs, elfs
    stamp = json.loads((out / "sglang_ddtree_tree.json").read_text())
    assert stamp["archs"] == "9.0;12.0" and stamp["torch"] == torch.__version__
    mod = tree_cuda._load_prebuilt(out)
    assert mod is not None and {"build_tree_layout", "tree_walk", "gdn_tree_commit"} <= set(dir(mod))


@needs_toolkit
def test_a_stale_prebuilt_is_not_loaded(prebuilt, tmp_path):
    out, lib = prebuilt
    for field, value in (("sources", "0" * 16), ("torch", "2.0.0")):
        d = tmp_path / field
        d.mkdir()
        shutil.copy2(lib, d / lib.name)
        stamp = json.loads((out / "sglang_ddtree_tree.json").read_text())
        (d / "sglang_ddtree_tree.json").write_text(json.dumps(dict(stamp, **{field: value})))
        assert tree_cuda._load_prebuilt(d) is None, field
    assert tree_cuda._load_prebuilt(tmp_path / "empty") is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or not __import__("os").environ.get("SGLANG_DDTREE_PREBUILT_DIR"),
                    reason="needs a GPU and a prebuilt directory (scripts/gpu_run.sh sets it from the bundle)")
def test_the_bundles_prebuilt_is_what_loads_on_this_gpu():
    """On the GPU host the bundle's ahead-of-time build is used, not a JIT build (the kernel
    tests beside this one then exercise it)."""
    d = Path(__import__("os").environ["SGLANG_DDTREE_PREBUILT_DIR"])
    mod = tree_cuda._load_prebuilt(d)
    assert mod is not None, f"stamp in {d} does not match this torch/sources/GPU"
    assert Path(tree_cuda._load().__file__).resolve().parent == d.resolve()
