"""verify_info.py's linear-state commit for hybrid targets in snapshot mode: the chain's "last
accepted step" becomes the verify position of the last node of the accepted path, and
prefix-cache tracking picks the path token on the tracking boundary; in wy mode the workspace
commits with the slots of the backend that ran the verify. Checked against recording stand-ins
for sglang's backend (the hybrid model itself cannot run on CPU)."""

from __future__ import annotations

import types

import pytest
import torch

from sglang_ddtree.server_args import GDN_SNAPSHOT, GDN_WY
from sglang_ddtree.verify_info import DDTreeVerifyInput


class _Backend:
    def __init__(self):
        self.calls = []

    def update_mamba_state_after_mtp_verify(self, **kw):
        self.calls.append(kw)


def _target(backend):
    return types.SimpleNamespace(model_runner=types.SimpleNamespace(attn_backend=backend, model="target-model"))


def _commit(backend, accepted, accept_len, batch, lens, commit_lens, width=16, runtimes=None, gdn=GDN_SNAPSHOT):
    vi = object.__new__(DDTreeVerifyInput)  # no engine: only the attributes the commit reads
    vi.draft_token_num = width
    vi._commit_linear_state(batch, torch.tensor(accepted), torch.tensor(accept_len), torch.tensor(lens),
                            torch.tensor(commit_lens, dtype=torch.int32), _target(backend), gdn, runtimes or {})


def test_last_accepted_tree_node_is_committed():
    be = _Backend()
    # Request 0 accepted root -> node 5 -> node 9; request 1 accepted nothing (root only).
    batch = types.SimpleNamespace(mamba_track_indices=None, req_pool_indices=torch.tensor([3, 7]))
    _commit(be, [[0, 5, 9, -1], [0, -1, -1, -1]], [2, 0], batch, [10, 20], [3, 1])
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
    batch = types.SimpleNamespace(mamba_track_indices=torch.tensor([1, 2]), req_pool_indices=torch.tensor([0, 1]))
    _commit(be, [[0, 4, 11, -1], [0, 2, -1, -1]], [2, 1], batch, [6, 9], [3, 2])
    (kw,) = be.calls
    assert kw["last_correct_step_indices"].tolist() == [11, 2]
    assert kw["mamba_steps_to_track"].tolist() == [4, -1]


def test_budget_auto_commits_through_the_backend_that_ran_the_verify():
    """With per-width verify runtimes (budget auto + graph verify), sglang's commit reads the
    state slots from the verify's backend metadata: the width's backend, not the model runner's."""
    from sglang_ddtree.engine.verify_widths import VerifyRuntime

    main, narrow = _Backend(), _Backend()
    rts = {33: VerifyRuntime(33, main, "g33"), 16: VerifyRuntime(16, narrow, "g16")}
    batch = types.SimpleNamespace(mamba_track_indices=None, req_pool_indices=torch.tensor([3, 7]))
    _commit(main, [[0, 5, -1], [0, -1, -1]], [1, 0], batch, [10, 20], [2, 1], width=16, runtimes=rts)
    assert len(narrow.calls) == 1 and main.calls == []
    _commit(main, [[0, 5, -1], [0, -1, -1]], [1, 0], batch, [10, 20], [2, 1], width=33, runtimes=rts)
    assert len(main.calls) == 1


def test_wy_commit_takes_the_slots_of_the_backend_that_ran_the_verify(monkeypatch):
    from sglang_ddtree.engine import tree_gdn
    from sglang_ddtree.engine.verify_widths import VerifyRuntime

    seen = []
    ws = types.SimpleNamespace(commit=lambda slots, accepted, accept_len, **kw: seen.append((slots.tolist(), kw)))
    monkeypatch.setattr(tree_gdn, "workspace", lambda: ws)

    def backend(slots):
        meta = types.SimpleNamespace(mamba_cache_indices=torch.tensor(slots))
        return types.SimpleNamespace(linear_attn_backend=types.SimpleNamespace(forward_metadata=meta))

    rts = {16: VerifyRuntime(16, backend([7, 8, 9]), "g16")}
    batch = types.SimpleNamespace(mamba_track_indices=None, req_pool_indices=torch.tensor([3, 7]))
    _commit(backend([1, 2, 3]), [[0, 5, -1], [0, -1, -1]], [1, 0], batch, [10, 20], [2, 1], width=16,
            runtimes=rts, gdn=GDN_WY)
    _commit(backend([1, 2, 3]), [[0, 5, -1], [0, -1, -1]], [1, 0], batch, [10, 20], [2, 1], width=33, gdn=GDN_WY)
    assert seen == [([7, 8], {}), ([1, 2], {})]  # the real requests' slots of that verify's backend


@pytest.mark.ddtree_cuda_path
def test_tracking_slots_rebuilt_before_the_verify(monkeypatch):
    """verify_info.prepare_state_tracking points each request at its current ping-pong tracking slot
    through sglang's own helper (EAGLE's path; sglang's DFLASH never does it, so its prefix cache
    keeps no decode-time state), and clears the extend-time mask so the verify forward does not
    track by itself. Without the extra buffer it leaves the batch alone."""
    import sglang.srt.speculative.spec_utils as su

    from sglang_ddtree.verify_info import prepare_state_tracking

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
