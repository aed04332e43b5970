"""GPU smoke suite (marked gpu; skipped without CUDA): real sglang on the GPU from the offline
bundle, CUDA graphs on, bf16, triton attention, pytorch sampling. Greedy output of every
speculative configuration must equal the same engine without speculation, on the tiny Llama
and the tiny Qwen3.5 hybrid targets.

Run on the GPU host (after extracting the bundle onto PYTHONPATH):

    python -m pytest -q test/srt/test_gpu_smoke.py
"""

from __future__ import annotations

import json

import pytest

from cpu_engine import PROMPTS, patched_env
from sglang_ddtree import tiny_models

pytestmark = pytest.mark.gpu

N = 33


def _kwargs(model, **extra):
    kw = dict(
        model_path=str(tiny_models.model_path(model)), device="cuda", dtype="bfloat16",
        attention_backend="triton", sampling_backend="pytorch", mem_fraction_static=0.25,
        max_total_tokens=8192, max_running_requests=8, cuda_graph_max_bs=4, log_level="error",
    )
    kw.update(extra)
    return kw


def _generate(env=None, **kw):
    import sglang as sgl

    with patched_env(env):
        engine = sgl.Engine(**kw)
    try:
        outs = engine.generate(input_ids=PROMPTS, sampling_params=dict(temperature=0.0, max_new_tokens=N))
    finally:
        engine.shutdown()
    return [o["output_ids"] for o in outs], outs


@pytest.fixture(scope="module")
def plain():
    return {m: _generate(**_kwargs(m))[0] for m in ("llama", "qwen35")}


def _dflash(model):
    return dict(speculative_algorithm="DFLASH", speculative_draft_model_path=str(tiny_models.model_path(f"dflash-{model}")))


def _standalone(model):
    return dict(speculative_algorithm="STANDALONE", speculative_draft_model_path=str(tiny_models.model_path(model)),
                speculative_num_steps=3, speculative_eagle_topk=2, speculative_num_draft_tokens=4)


def _ddtree(budget):
    return dict(speculative_algorithm="DDTREE", speculative_draft_model_path=str(tiny_models.model_path("dflash-llama")),
                speculative_ddtree_budget=budget, speculative_ddtree_topk=4)


@pytest.mark.parametrize("name,model,spec", [
    ("dflash", "llama", _dflash("llama")),
    ("standalone-topk2", "llama", _standalone("llama")),
    ("standalone-topk2", "qwen35", _standalone("qwen35")),
])
def test_speculative_equals_plain(plain, name, model, spec):
    got, outs = _generate(**_kwargs(model, **spec))
    assert got == plain[model], name
    if name.startswith("standalone"):
        assert max(o["meta_info"]["spec_accept_length"] for o in outs) > 1.0


@pytest.mark.parametrize("budget", [8, 32, 128])
def test_ddtree_equals_plain(plain, budget):
    got, _ = _generate(**_kwargs("llama", **_ddtree(budget)))
    assert got == plain["llama"]


def test_ddtree_oracle_full_paths_on_gpu(plain, tmp_path):
    oracle = tmp_path / "oracle.json"
    oracle.write_text(json.dumps({"mode": "first", "continuations": {
        ",".join(map(str, p)): c for p, c in zip(PROMPTS, plain["llama"])}}))
    got, outs = _generate(env={"SGLANG_DDTREE_TEST_ORACLE": str(oracle)}, **_kwargs("llama", **_ddtree(15)))
    assert got == plain["llama"]
    for o in outs:
        assert o["meta_info"]["spec_correct_drafts_histogram"] == [0] * 15 + [2]
