"""GPU suite of DDTREE on attention backends other than triton (marked gpu; skipped without
CUDA): flashinfer (the tree mask through its custom-mask prefill) and fa3 (Hopper), on the
head-dim-64 tiny Llama and tiny hybrid (wy), budgets 16 (an oracle drafter accepting later
siblings), 64 and auto, CUDA graphs and overlap on; each against the plain engine on the same
backend, with the smoke suite's assertions (``gpu_cases.assert_speculative``).

    bash scripts/gpu_run.sh --here test test/e2e/test_gpu_backends.py
"""

from __future__ import annotations

import pytest

import gpu_cases
from gpu_suite import suite_results

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return suite_results(tmp_path_factory, "backends", gpu_cases.BACKENDS)


@pytest.mark.parametrize("name", [n for n in gpu_cases.BACKENDS if not n.startswith("plain-")])
def test_backend_equals_plain(results, name):
    xfail = gpu_cases.assert_speculative(results, name)
    if xfail:
        pytest.xfail(xfail)
