"""GPU smoke suite (marked gpu; skipped without CUDA): real sglang on the GPU from the offline
bundle, bf16, triton attention, pytorch sampling, decode/verify CUDA graphs on. Greedy output
of every speculative configuration must equal the same engine without speculation, on the tiny
Llama and the tiny Qwen3.5 hybrid targets: plain, DFLASH, STANDALONE top-k 2 and DDTREE (tree
verify under CUDA graphs with the tree mask, the default; one case eager; hybrid through sglang's
per-node state path). Each engine runs in its own process
(``gpu_cases.py`` says why); results and logs go to ``$SGLANG_DDTREE_GPU_RESULTS`` (default: a
temporary folder). The developer previews have their own suite, ``test_gpu_preview.py``.

    bash scripts/gpu_run.sh --here test test/e2e/test_gpu_smoke.py
"""

from __future__ import annotations

import pytest

import gpu_cases
from gpu_suite import suite_results

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return suite_results(tmp_path_factory, "smoke", gpu_cases.SMOKE)


@pytest.mark.parametrize("model", [n.split("-", 1)[1] for n in gpu_cases.SMOKE if n.startswith("plain-")])
def test_plain_runs_with_decode_graphs(results, model):
    gpu_cases.assert_plain(results, model)


@pytest.mark.parametrize("name", [n for n in gpu_cases.SMOKE if not n.startswith("plain-")])
def test_speculative_equals_plain(results, name):
    xfail = gpu_cases.assert_speculative(results, name)
    if xfail:
        pytest.xfail(xfail)
