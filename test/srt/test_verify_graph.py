"""compat/verify_graph.py (developer preview of CUDA-graph tree verify): the capture-time verify
input of a DDTREE target gets the runner's mask buffer only when the preview is on, never for
the drafter, never for other algorithms, never under the no-mask control; the graph guard lets
DDTREE verifies replay only when the preview is on. (The replay itself is GPU-only:
gpu_cases ddtree16-llama-oracle-sibling-graphs / -nomask.)"""

from __future__ import annotations

import types

import pytest
import torch

from sglang_ddtree.compat import verify_graph as vg


def _runner(draft=False):
    return types.SimpleNamespace(model_runner=types.SimpleNamespace(is_draft_worker=draft),
                                 buffers=types.SimpleNamespace(custom_mask=torch.ones(8, dtype=torch.bool)))


@pytest.fixture
def ddtree_server(monkeypatch):
    import sglang.srt.runtime_context as rc

    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm="DDTREE"))


def _spec():
    return types.SimpleNamespace(custom_mask=None, draft_token_num=17)


def test_capture_gets_the_mask_buffer_only_with_the_preview(ddtree_server, monkeypatch):
    monkeypatch.delenv(vg.GRAPH_ENV, raising=False)
    spec = _spec()
    assert vg._capture_with_mask(spec, _runner(), 17).custom_mask is None
    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    runner = _runner()
    got = vg._capture_with_mask(spec, runner, 17)
    assert got.custom_mask is runner.buffers.custom_mask and got.draft_token_num == 17
    assert spec.custom_mask is None  # a copy: the runner's own object is untouched
    assert vg._capture_with_mask(_spec(), _runner(draft=True), 17).custom_mask is None
    monkeypatch.setenv(vg.NOMASK_CONTROL_ENV, "1")
    assert vg._capture_with_mask(_spec(), _runner(), 17).custom_mask is None


def test_other_algorithms_are_left_alone(monkeypatch):
    import sglang.srt.runtime_context as rc

    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm="DFLASH"))
    assert vg._capture_with_mask(_spec(), _runner(), 17).custom_mask is None


def test_graph_guard_follows_the_preview(monkeypatch):
    from sglang_ddtree.registration import _no_graph_for_tree_verify
    from sglang_ddtree.worker import DDTreeVerifyInput

    fb = types.SimpleNamespace(spec_info=object.__new__(DDTreeVerifyInput))
    original = lambda self, forward_batch: "sglang decides"  # noqa: E731
    monkeypatch.delenv(vg.GRAPH_ENV, raising=False)
    assert _no_graph_for_tree_verify(original, None, fb) is False
    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    assert _no_graph_for_tree_verify(original, None, fb) == "sglang decides"
