"""Test configuration shared by every test under test/.

- Without a GPU, ``test/harness`` (the CPU stand-in for ``sgl_kernel``) goes on ``sys.path``
  and on ``PYTHONPATH`` (so sglang's spawned scheduler processes import it too), and
  ``SGLANG_USE_CPU_ENGINE=1`` selects sglang's CPU platform. With a GPU the real
  ``sgl_kernel`` is used and neither is set.
- Without a GPU, ``SGLANG_DDTREE_TEST_FORK_CHILDREN=1``: the CPU engines the tests start fork
  their scheduler and detokenizer instead of spawning them (``sglang_ddtree/testing/
  fork_children.py`` says when it applies); ``cpu_engine.SPAWN`` keeps spawn for a server.
- Tests marked ``gpu`` are skipped when no CUDA device is present; tests marked
  ``ddtree_cuda_path`` (DDTREE's CUDA path: verify graphs, GPU memory, hybrid targets'
  GatedDeltaNet state, unit-tested on CPU) on a release whose ``ReleaseTraits.ddtree_devices``
  lacks cuda (sglang 0.5.23 so far).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HARNESS = str(Path(__file__).resolve().parent / "harness")


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


if not _has_cuda():
    if HARNESS not in sys.path:
        sys.path.insert(0, HARNESS)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [HARNESS] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
    os.environ.setdefault("SGLANG_DDTREE_TEST_FORK_CHILDREN", "1")


# The slowest test files, slowest first (seconds on the 2-core CI machine with one OpenMP thread
# per process: ~83, 71, 63, 58, 56, 43, 41, 41, 39, 36, 35, 24, 21). Collected first, so that
# pytest-xdist's per-file scheduling (``--dist loadfile``) hands them out before the many short
# files and both workers end together; the order within a file is kept.
SLOW_FIRST = (
    "bench/test_bench_scripts.py", "kernels/test_verify.py", "e2e/test_real_default_cpu.py",
    "e2e/test_ddtree_cpu.py", "e2e/test_trace_replay_cpu.py", "e2e/test_wheel.py", "e2e/test_soak_cpu.py",
    "e2e/test_ddtree_http_cpu.py", "bench/test_replay_bench.py", "e2e/test_http_cpu.py",
    "engine/test_tree_gdn_layer.py", "kernels/test_cuda_prebuilt.py", "e2e/test_trace_record_cpu.py",
)


def _slow_rank(item) -> int:
    path = Path(str(item.fspath)).as_posix()
    return next((i for i, f in enumerate(SLOW_FIRST) if path.endswith("/test/" + f)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config, items):
    items.sort(key=_slow_rank)  # (stable: files stay whole and in order)
    from sglang_ddtree.compat import releases

    if "cuda" not in releases.CURRENT.ddtree_devices:
        cuda_path = pytest.mark.skip(reason=f"DDTREE's CUDA path is not served with sglang {releases.RELEASE} yet")
        for item in items:
            if "ddtree_cuda_path" in item.keywords:
                item.add_marker(cuda_path)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory):
    """The sglang-ddtree wheel built from this checkout as ``scripts/build_wheel.sh`` builds it
    (``pip wheel --no-build-isolation``: with nvcc here, the CUDA tree kernels prebuilt in it);
    built once per test run: the pytest-xdist workers share it through their common temporary
    folder under a file lock (the kernel build takes ~30 s)."""
    import subprocess

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is a folder of the run's own (popen-gwN): its parent is
    # common to the run's workers and to nothing else. Without xdist the base is the run's.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / "built-wheel"
    with FileLock(str(shared / "built-wheel.lock")):
        found = sorted(out.glob("sglang_ddtree-*.whl"))
        if not found:
            out.mkdir(exist_ok=True)
            root = Path(__file__).resolve().parents[1]
            r = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "-q",
                                "--no-deps", "--no-build-isolation", "-w", str(out), str(root)],
                               capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            found = sorted(out.glob("sglang_ddtree-*.whl"))
    (whl,) = found
    return whl
