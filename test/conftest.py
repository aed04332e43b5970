"""Test configuration shared by every test under test/.

- Without a GPU, ``test/harness`` (the CPU stand-in for ``sgl_kernel``) goes on ``sys.path``
  and on ``PYTHONPATH`` (so sglang's spawned scheduler processes import it too), and
  ``SGLANG_USE_CPU_ENGINE=1`` selects sglang's CPU platform. With a GPU the real
  ``sgl_kernel`` is used and neither is set.
- Tests marked ``gpu`` are skipped when no CUDA device is present.
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


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
