"""GPU suite of the developer previews and known limits (marked gpu; skipped without CUDA), the
same assertions as the smoke suite (``gpu_cases.assert_speculative``): explicit CUDA-graph tree
verify cases (the default now; with a no-mask negative control that must mismatch),
``--speculative-ddtree-gdn-mode wy`` (snapshot-free GatedDeltaNet kernels, and its diagnostics),
budget 128 on the hybrid through sglang's per-node path. A case moves to the smoke suite when
it passes here and its feature becomes a default.

    bash scripts/gpu_run.sh --here test test/e2e/test_gpu_preview.py
"""

from __future__ import annotations

import pytest

import gpu_cases
from gpu_suite import suite_results

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return suite_results(tmp_path_factory, "preview", gpu_cases.PREVIEW)


@pytest.mark.parametrize("name", gpu_cases.PREVIEW)
def test_preview_equals_plain(results, name):
    xfail = gpu_cases.assert_speculative(results, name)
    if xfail:
        pytest.xfail(xfail)
