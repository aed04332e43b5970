"""The DDTREE worker's linear-state commit for hybrid targets (worker._commit_linear_state): the
chain's "last accepted step" becomes the verify position of the last node of the accepted
path, and prefix-cache tracking picks the path token on the tracking boundary. Checked against
a recording stand-in for sglang's backend (the hybrid model itself cannot run on CPU)."""

from __future__ import annotations

import types

import torch

from sglang_ddtree.core.accept import Acceptance
from sglang_ddtree.worker import DDTreeWorker


class _Backend:
    def __init__(self):
        self.calls = []

    def update_mamba_state_after_mtp_verify(self, **kw):
        self.calls.append(kw)


def _worker(backend):
    w = object.__new__(DDTreeWorker)  # no engine: only the attributes the method reads
    runner = types.SimpleNamespace(attn_backend=backend, model="target-model")
    w._target_worker = types.SimpleNamespace(model_runner=runner)  # BaseSpecWorker.target_worker reads it
    w._verify_runtimes = {}
    return w


def _acc(accepted, accept_len):
    accepted = torch.tensor(accepted)
    return Acceptance(accepted=accepted, accept_len=torch.tensor(accept_len),
                      new_tokens=torch.zeros_like(accepted), num_new=torch.tensor(accept_len) + 1)


def test_last_accepted_tree_node_is_committed():
    be = _Backend()
    # Request 0 accepted root -> node 5 -> node 9; request 1 accepted nothing (root only).
    acc = _acc([[0, 5, 9, -1], [0, -1, -1, -1]], [2, 0])
    batch = types.SimpleNamespace(mamba_track_indices=None, req_pool_indices=torch.tensor([3, 7]))
    _worker(be)._commit_linear_state(batch, acc, torch.tensor([10, 20]), torch.tensor([3, 1], dtype=torch.int32), 16)
    (kw,) = be.calls
    assert kw["last_correct_step_indices"].tolist() == [9, 0]
    assert kw["mamba_steps_to_track"] is None and kw["model"] == "target-model"
    assert kw["req_pool_indices"].tolist() == [3, 7]


def test_tracking_boundary_maps_path_index_to_tree_node(monkeypatch):
    import sglang.srt.runtime_context as rc

    monkeypatch.setattr(rc, "get_exec", lambda: types.SimpleNamespace(mamba=types.SimpleNamespace(mamba_track_interval=8)))
    be = _Backend()
    # Request 0: prefix 6, commits 3 tokens (6,7,8): crosses 8; the token at position 7 is path
    # index 1 = node 4. Request 1: prefix 9, commits 2 (9,10): no boundary -> -1.
    acc = _acc([[0, 4, 11, -1], [0, 2, -1, -1]], [2, 1])
    batch = types.SimpleNamespace(mamba_track_indices=torch.tensor([1, 2]), req_pool_indices=torch.tensor([0, 1]))
    _worker(be)._commit_linear_state(batch, acc, torch.tensor([6, 9]), torch.tensor([3, 2], dtype=torch.int32), 16)
    (kw,) = be.calls
    assert kw["last_correct_step_indices"].tolist() == [11, 2]
    assert kw["mamba_steps_to_track"].tolist() == [4, -1]


def test_budget_auto_commits_through_the_backend_that_ran_the_verify():
    """With per-width verify runtimes (budget auto + graph verify), sglang's commit reads the
    state slots from the verify's backend metadata: the width's backend, not the model runner's."""
    from sglang_ddtree.compat.verify_widths import VerifyRuntime

    main, narrow = _Backend(), _Backend()
    w = _worker(main)
    w._verify_runtimes = {33: VerifyRuntime(33, main, "g33"), 16: VerifyRuntime(16, narrow, "g16")}
    acc = _acc([[0, 5, -1], [0, -1, -1]], [1, 0])
    batch = types.SimpleNamespace(mamba_track_indices=None, req_pool_indices=torch.tensor([3, 7]))
    w._commit_linear_state(batch, acc, torch.tensor([10, 20]), torch.tensor([2, 1], dtype=torch.int32), 16)
    assert len(narrow.calls) == 1 and main.calls == []
    w._commit_linear_state(batch, acc, torch.tensor([10, 20]), torch.tensor([2, 1], dtype=torch.int32), 33)
    assert len(main.calls) == 1


def test_tracking_slots_rebuilt_before_the_verify(monkeypatch):
    """worker.prepare_state_tracking points each request at its current ping-pong tracking slot
    through sglang's own helper (EAGLE's path; sglang's DFLASH never does it, so its prefix cache
    keeps no decode-time state), and clears the extend-time mask so the verify forward does not
    track by itself. Without the extra buffer it leaves the batch alone."""
    import sglang.srt.speculative.spec_utils as su

    from sglang_ddtree.worker import prepare_state_tracking

    real_tensor = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, pin_memory=False, **k: real_tensor(*a, **k))  # no CUDA here
    extra = {"on": True}
    sa = types.SimpleNamespace(enable_mamba_extra_buffer=lambda: extra["on"], enable_mamba_extra_buffer_lazy=lambda: False)
    monkeypatch.setattr(su, "get_server_args", lambda: sa)

    def batch():
        pool = types.SimpleNamespace(req_index_to_mamba_ping_pong_track_buffer_mapping=torch.tensor(
            [[10, 11], [20, 21], [30, 31]]))
        reqs = [types.SimpleNamespace(mamba_next_track_idx=1), types.SimpleNamespace(mamba_next_track_idx=None)]
        return types.SimpleNamespace(req_to_token_pool=pool, req_pool_indices=torch.tensor([2, 0]), reqs=reqs,
                                     mamba_track_indices=None, mamba_track_mask=torch.tensor([True, True]),
                                     mamba_track_seqlens=torch.tensor([1, 2]))

    b = batch()
    prepare_state_tracking(b)
    assert b.mamba_track_indices.tolist() == [31, 10]  # request 2's slot 1; request 0's slot 0 (none yet)
    assert b.mamba_track_mask is None and b.mamba_track_seqlens is None
    extra["on"] = False
    b = batch()
    prepare_state_tracking(b)
    assert b.mamba_track_indices is None and b.mamba_track_mask is not None
