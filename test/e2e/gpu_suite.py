"""Shared fixture body of the GPU suites: where the case records go, and reuse across calls."""

from __future__ import annotations

import os
from pathlib import Path

import gpu_cases


def suite_results(tmp_path_factory, suite: str, names) -> dict:
    """Run ``names`` (plus their plain references) and return their records.

    ``SGLANG_DDTREE_GPU_CASES_DIR`` (with ``SGLANG_DDTREE_GPU_REUSE=1``): evaluate a selection
    split over several device calls, reusing passing records of the same package sources.
    """
    cases_dir = os.environ.get("SGLANG_DDTREE_GPU_CASES_DIR")
    out = Path(os.environ.get("SGLANG_DDTREE_GPU_RESULTS") or tmp_path_factory.mktemp(f"gpu-{suite}"))
    return gpu_cases.run_all(Path(cases_dir) if cases_dir else out / suite, only=list(names))
