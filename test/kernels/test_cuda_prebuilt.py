"""The CUDA tree kernels build ahead of time on a machine without a GPU (nvcc + the CUDA torch
wheel): SASS for sm_90, sm_100 and sm_120 and PTX of sm_120; the loader takes such a build only
when its stamp matches this torch, these sources and the device (SASS for it, or PTX not newer);
otherwise it JIT-builds on the GPU host. On a GPU where neither works the worker refuses to start
unless --speculative-ddtree-allow-slow-kernels asks for the torch path."""

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
def prebuilt(built_wheel, tmp_path_factory):
    """The prebuilt extension as the wheel carries it (its build step calls
    ``tree_cuda.build_prebuilt``), unpacked: ``(folder, library)``."""
    import zipfile

    out = tmp_path_factory.mktemp("prebuilt")
    with zipfile.ZipFile(built_wheel) as z:
        for name in z.namelist():
            if name.startswith("sglang_ddtree/kernels/prebuilt/"):
                (out / Path(name).name).write_bytes(z.read(name))
    libs = sorted(out.glob("sglang_ddtree_tree*.so"))
    assert libs, f"the wheel carries no prebuilt extension: {sorted(p.name for p in out.iterdir())}"
    return out, libs[0]


@needs_toolkit
def test_prebuilt_has_every_target_and_loads(prebuilt):
    out, lib = prebuilt
    elfs = subprocess.run([str(_CO), "--list-elf", str(lib)], capture_output=True, text=True).stdout
    assert all(f"sm_{a}" in elfs for a in ("90", "100", "120")), elfs
    ptx = subprocess.run([str(_CO), "--list-ptx", str(lib)], capture_output=True, text=True).stdout
    assert "sm_120" in ptx, ptx
    stamp = json.loads((out / "sglang_ddtree_tree.json").read_text())
    assert stamp["archs"] == "9.0;10.0;12.0+PTX" and stamp["torch"] == torch.__version__
    mod = tree_cuda._load_prebuilt(out)
    assert mod is not None and {"build_tree_layout", "tree_walk", "gdn_tree_commit"} <= set(dir(mod))
    assert mod.ddtree_origin == f"prebuilt for 9.0;10.0;12.0+PTX ({out})"


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


@pytest.mark.parametrize("archs,cap,runs", [
    ("9.0;10.0;12.0+PTX", (9, 0), True), ("9.0;10.0;12.0+PTX", (10, 0), True),
    ("9.0;10.0;12.0+PTX", (12, 0), True), ("9.0;10.0;12.0+PTX", (12, 1), True),  # PTX, JIT by the driver
    ("9.0;10.0;12.0+PTX", (8, 9), False), ("9.0;10.0;12.0+PTX", (10, 3), False),  # no SASS, PTX newer
    ("9.0;12.0", (12, 1), False), ("8.0+PTX", (9, 0), True), ("", (9, 0), False),
])
def test_which_devices_a_prebuilt_runs_on(archs, cap, runs):
    assert tree_cuda.runs_on(archs, *cap) is runs


def test_kernels_for_a_device(monkeypatch):
    assert tree_cuda.serves("cpu", allow_slow=False) is False  # the CPU engine: the torch path
    monkeypatch.setattr(tree_cuda, "available", lambda: None)
    assert tree_cuda.serves("cuda:0", allow_slow=False) is True
    monkeypatch.setattr(tree_cuda, "available", lambda: "build failed: nvcc not found")
    with pytest.raises(RuntimeError, match="build failed: nvcc not found.*--speculative-ddtree-allow-slow-kernels"):
        tree_cuda.serves("cuda:0", allow_slow=False)
    assert tree_cuda.serves("cuda:0", allow_slow=True) is False
