"""Per-width target-verify runtimes for ``--speculative-ddtree-budget auto`` with the CUDA-graph
tree verify (engine/verify_widths.py), on stand-ins for sglang's model runner, spec config and
graph runner (a real capture needs a GPU: test/e2e/gpu_cases.py ``ddtree-auto-*`` cases)."""

from __future__ import annotations

import contextlib
import types

import pytest

from sglang_ddtree.engine import verify_widths as vw


class _Spec:
    def __init__(self, width):
        self.speculative_num_draft_tokens = width

    @contextlib.contextmanager
    def override(self, **kw):
        old = dict(self.__dict__)
        self.__dict__.update(kw)
        try:
            yield self
        finally:
            self.__dict__.update(old)


def _runner(spec, main_width=33, wrong_width=False):
    seen = []

    class Graphs:
        def __init__(self, model_runner, attn_backend=None, speculative_num_draft_tokens=None):
            # What sglang's runner reads while it captures: the backend on the model runner and
            # the width it was given / the spec config says.
            seen.append(("graphs", speculative_num_draft_tokens, spec.speculative_num_draft_tokens,
                         model_runner.attn_backend is attn_backend))
            self.captured_req_width = speculative_num_draft_tokens + (1 if wrong_width else 0)
            self.attn_backend = attn_backend

    mr = types.SimpleNamespace(attn_backend="main-backend", init_new_workspace=False,
                               decode_cuda_graph_runner=types.SimpleNamespace(captured_req_width=main_width))

    def get_backend(init_new_workspace=False):
        assert init_new_workspace
        mr.init_new_workspace = True  # sglang's factory flips it; the builder must restore it
        seen.append(("backend", spec.speculative_num_draft_tokens))
        return f"backend-{spec.speculative_num_draft_tokens}"

    mr._get_attention_backend = get_backend
    mr._decode_cuda_graph_runner_cls = lambda: Graphs
    return mr, seen


@pytest.fixture
def spec(monkeypatch):
    import sglang.srt.runtime_context as rc

    s = _Spec(33)
    monkeypatch.setattr(rc, "get_spec", lambda: s)
    return s


@pytest.mark.ddtree_cuda_path
def test_one_runtime_per_width_built_under_that_width(spec):
    mr, seen = _runner(spec)
    main_graphs = mr.decode_cuda_graph_runner
    rts = vw.build_verify_runtimes(mr, [16, 33, 17, 16])
    assert sorted(rts) == [16, 17, 33]
    assert rts[33].attn_backend == "main-backend" and rts[33].graph_runner is main_graphs
    assert rts[17].attn_backend == "backend-17" and rts[17].graph_runner.captured_req_width == 17
    assert rts[16].attn_backend == "backend-16"
    # Widest first; each backend and capture saw its own width in the spec config, and the
    # capture ran with its backend on the model runner.
    assert seen == [("backend", 17), ("graphs", 17, 17, True), ("backend", 16), ("graphs", 16, 16, True)]
    # Everything the model runner and the spec config had is back.
    assert mr.attn_backend == "main-backend" and mr.decode_cuda_graph_runner is main_graphs
    assert mr.init_new_workspace is False and spec.speculative_num_draft_tokens == 33


def test_no_verify_graphs_means_no_runtimes(spec):
    mr, seen = _runner(spec)
    mr.decode_cuda_graph_runner = None  # --disable-cuda-graph, or the eager tree verify
    assert vw.build_verify_runtimes(mr, [16, 33]) == {} and seen == []


@pytest.mark.ddtree_cuda_path
def test_a_capture_of_another_width_is_an_error(spec):
    mr, _ = _runner(spec, wrong_width=True)
    with pytest.raises(RuntimeError, match="width 16"):
        vw.build_verify_runtimes(mr, [16, 33])
    assert mr.attn_backend == "main-backend" and spec.speculative_num_draft_tokens == 33


@pytest.mark.ddtree_cuda_path
def test_verify_runtime_swaps_for_the_block_and_restores(spec):
    mr, _ = _runner(spec)
    main_graphs = mr.decode_cuda_graph_runner
    rts = vw.build_verify_runtimes(mr, [16, 33])
    with vw.verify_runtime(mr, rts, 16):
        assert mr.attn_backend == "backend-16" and mr.decode_cuda_graph_runner.captured_req_width == 16
    assert mr.attn_backend == "main-backend" and mr.decode_cuda_graph_runner is main_graphs
    with pytest.raises(ValueError):
        with vw.verify_runtime(mr, rts, 16):
            raise ValueError("verify failed")
    assert mr.attn_backend == "main-backend" and mr.decode_cuda_graph_runner is main_graphs
    with pytest.raises(RuntimeError, match="no verify runtime for width 20"):
        with vw.verify_runtime(mr, rts, 20):
            pass
    with vw.verify_runtime(mr, {}, 20):  # no runtimes (fixed budget, or eager): nothing swapped
        assert mr.attn_backend == "main-backend"
