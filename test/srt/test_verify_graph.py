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


def test_capture_gets_the_mask_buffer_unless_turned_off(ddtree_server, monkeypatch):
    monkeypatch.setenv(vg.GRAPH_ENV, "0")
    spec = _spec()
    assert vg._capture_with_mask(spec, _runner(), 17).custom_mask is None
    monkeypatch.delenv(vg.GRAPH_ENV)  # the default: on
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


def test_graph_guard_follows_the_switch(monkeypatch):
    from sglang_ddtree.registration import _no_graph_for_tree_verify
    from sglang_ddtree.worker import DDTreeVerifyInput

    fb = types.SimpleNamespace(spec_info=object.__new__(DDTreeVerifyInput))
    original = lambda self, forward_batch: "sglang decides"  # noqa: E731
    monkeypatch.setenv(vg.GRAPH_ENV, "0")
    assert _no_graph_for_tree_verify(original, None, fb) is False
    monkeypatch.delenv(vg.GRAPH_ENV)  # the default: on
    assert _no_graph_for_tree_verify(original, None, fb) == "sglang decides"
    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    assert _no_graph_for_tree_verify(original, None, fb) == "sglang decides"


def _hybrid_runner(max_bs=4, width=5):
    return types.SimpleNamespace(
        model_runner=types.SimpleNamespace(is_draft_worker=False,
                                           attn_backend=types.SimpleNamespace(linear_attn_backend=object())),
        buffers=types.SimpleNamespace(custom_mask=torch.ones(8, dtype=torch.bool), input_ids=torch.zeros(4)),
        captured_req_width=width, max_bs=max_bs, bs=None)


def test_wy_capture_carries_a_static_tree_and_replays_restage_it(monkeypatch):
    import sglang.srt.runtime_context as rc

    from sglang_ddtree.compat.gdn_wy import WyVerifyState

    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm="DDTREE", speculative_ddtree_gdn_mode="wy", speculative_ddtree_max_depth=4))
    runner = _hybrid_runner()
    cap2 = vg._capture_with_mask(_spec(), runner, 2 * 5).ddtree_wy   # captures for bs 2 and 4
    cap4 = vg._capture_with_mask(_spec(), runner, 4 * 5).ddtree_wy
    assert cap2.parent.shape == (2, 5) and cap4.anc.shape == (4, 5, 5)
    # The verify's depth bound is the tree builder's limit (--speculative-ddtree-max-depth).
    assert cap2.max_depth == cap4.max_depth == 4
    assert cap2.parent.data_ptr() == cap4.parent.data_ptr()  # one buffer, sliced per size
    # One commit-input buffer dict for every size's graph, sized for the largest batch.
    assert cap2.work is cap4.work and cap2.work == {} and cap2.work_rows == cap4.work_rows == runner.max_bs
    assert (cap4.parent == -1).all() and torch.equal(cap4.anc[1], torch.eye(5, dtype=torch.uint8))
    # What the captured call saved for the commit (graph-pool tensors in a real capture).
    cap2.saved[7] = ("layer", "cache", "slots")
    cap2.work["u"], cap2.pool_states = torch.zeros(1), "pool"
    # A replay of 1 request padded to the bs-2 graph: the step's tree lands in row 0.
    parent = torch.tensor([[-1, 0, 0, 1, -1]], dtype=torch.int32)
    step = WyVerifyState(parent=parent, anc=torch.ones(1, 5, 5, dtype=torch.uint8))
    runner.bs = 2
    fb = types.SimpleNamespace(spec_info=types.SimpleNamespace(ddtree_wy=step))
    assert vg._stage_after_load("ret", runner, fb) == "ret"
    assert torch.equal(cap2.parent[0], parent[0]) and (cap2.parent[1] == -1).all()
    assert (cap2.anc[0] == 1).all() and torch.equal(cap2.anc[1], torch.eye(5, dtype=torch.uint8))
    assert step.saved == cap2.saved and step.saved is not cap2.saved
    # ... and the buffers the replay writes, the pool it captured, the buffers' batch size.
    assert step.work is cap2.work and step.pool_states == "pool" and step.work_rows == runner.max_bs
    assert step.tables is cap2.tables is cap4.tables
    step.saved.clear()  # what wy_commit does after the commit
    assert 7 in cap2.saved  # the capture's entries survive for the next replay
    # A batch size without a wy capture is a loud error, never a silent eager-state commit.
    runner.bs = 3
    with pytest.raises(RuntimeError, match="batch size 3"):
        vg._stage_after_load(None, runner, fb)


def test_wy_verify_widths_carve_their_commit_inputs_from_one_storage(monkeypatch):
    """Budget auto captures one graph runner per verify width on one model runner; their commit
    inputs share the largest width's memory (one width verifies and commits at a time), not one
    set per width (session 14: auto over widths 16 / 17 / 33 ran the 64-request capture out of
    memory)."""
    import sglang.srt.runtime_context as rc

    from sglang_ddtree.compat import gdn_wy

    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm="DDTREE", speculative_ddtree_gdn_mode="wy", speculative_ddtree_max_depth=4))
    wide, narrow = _hybrid_runner(width=5), _hybrid_runner(width=3)
    narrow.model_runner = wide.model_runner  # budget auto: the widths' runners share the model runner
    a = vg._capture_with_mask(_spec(), wide, 4 * 5).ddtree_wy
    b = vg._capture_with_mask(_spec(), narrow, 2 * 3).ddtree_wy
    assert a.work_storage is b.work_storage and a.work is not b.work
    C, HV, V, L = 6, 3, 2, 2  # channels, value heads, value dim, pool layers
    xa, ua, Ga = gdn_wy._work_views(a, 1, L, torch.arange(4 * 5 * C, dtype=torch.float32).view(20, C), HV, V)
    assert a.work["u"].shape == (L, 4, 5, HV, V) and a.work["x"].shape == (L, 4 * 5, C)
    xb, ub, Gb = gdn_wy._work_views(b, 0, L, torch.ones(2 * 3, C), HV, V)
    assert b.work["u"].shape == (L, 4, 3, HV, V)  # buffers for the runner's largest batch (4)
    for name in ("x", "u", "G"):
        assert b.work[name].data_ptr() == a.work[name].data_ptr()  # the same memory
    assert a.work_storage["u"].numel() == L * 4 * 5 * HV * V  # the largest width's size, not the sum
    assert torch.equal(xb, torch.ones(6, C)) and ub.shape == (2, 3, HV, V)
    # A width needing more than the storage holds gets fresh memory; the others keep theirs.
    before = a.work["u"].data_ptr()
    big = gdn_wy._carve(a.work_storage, "u", (L, 4, 9, HV, V), torch.float32, "cpu")
    assert big.data_ptr() != before and a.work["u"].data_ptr() == before
    assert a.work_storage["u"].numel() == big.numel()
    # Without a storage (the eager verify's per-step state) each tensor is its own.
    own = gdn_wy._carve(None, "u", (2, 3), torch.float32, "cpu")
    assert own.shape == (2, 3) and own.is_contiguous()


def test_wy_storage_is_made_for_the_widest_capture_when_a_narrower_width_has_more_rows(monkeypatch):
    """Budget auto captures the widest width first, but a narrower width can be captured at more
    requests (width caps): 257 x 16 then 129 x 64 positions at Qwen3.6-27B. The storage is made
    once for the most positions any width uses (set by the capture hook), so the later width
    carves the same memory instead of replacing it while the first width's graphs keep the old
    one alive (session 16: +8.9 GB, and the next capture ran out of memory)."""
    import sglang.srt.runtime_context as rc

    from sglang_ddtree.compat import gdn_wy

    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm="DDTREE", speculative_ddtree_gdn_mode="wy", speculative_ddtree_max_depth=4))
    C, HV, V, L = 6, 3, 2, 2
    for reserved, shared in ((8 * 3, True), (0, False)):
        wide, narrow = _hybrid_runner(max_bs=2, width=5), _hybrid_runner(max_bs=8, width=3)
        narrow.model_runner = wide.model_runner
        if reserved:
            wide.model_runner._ddtree_wy_work_storage_tokens = reserved
        a = vg._capture_with_mask(_spec(), wide, 2 * 5).ddtree_wy
        gdn_wy._work_views(a, 0, L, torch.zeros(2 * 5, C), HV, V)
        b = vg._capture_with_mask(_spec(), narrow, 8 * 3).ddtree_wy
        gdn_wy._work_views(b, 0, L, torch.zeros(8 * 3, C), HV, V)
        assert a.work_storage is b.work_storage
        for name in ("x", "u", "G"):
            assert (b.work[name].data_ptr() == a.work[name].data_ptr()) is shared, (reserved, name)
        if shared:
            assert a.work_storage["u"].numel() == L * 24 * HV * V  # 24 positions, made once


def test_attention_only_and_snapshot_captures_carry_no_tree(monkeypatch):
    import sglang.srt.runtime_context as rc

    monkeypatch.setenv(vg.GRAPH_ENV, "1")
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm="DDTREE", speculative_ddtree_gdn_mode="wy"))
    assert getattr(vg._capture_with_mask(_spec(), _runner(), 17), "ddtree_wy", None) is None  # no linear layers
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm="DDTREE", speculative_ddtree_gdn_mode="snapshot"))
    assert getattr(vg._capture_with_mask(_spec(), _hybrid_runner(), 10), "ddtree_wy", None) is None
