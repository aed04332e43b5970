"""engine/tree_gdn.py's workspace on CPU: a step's tree lands in its width's static buffers (the
ones the captured graphs read) when they hold its requests, else in buffers of its own; the
commit inputs of every width's static buffers share one storage made for the most positions any
width uses; the conv weight tables are built once; a commit with no verified layer is refused.
(The kernels themselves: test/kernels; the layer in an engine: the GPU cases.)"""

from __future__ import annotations

import types

import pytest
import torch

from sglang_ddtree.engine import tree_gdn


def _tree(bs, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    parent = torch.full((bs, n), -1, dtype=torch.int64)
    for i in range(1, n):
        parent[:, i] = torch.randint(0, i, (bs,), generator=g)
    anc = torch.zeros(bs, n, n, dtype=torch.bool)
    for b in range(bs):
        for i in range(n):
            j = i
            while j >= 0:
                anc[b, i, j] = True
                j = int(parent[b, j])
    return parent, anc


def test_steps_use_the_static_buffers_of_their_width_when_they_fit():
    ws = tree_gdn.TreeGdnWorkspace(max_depth=4)
    ws.begin_capture(4, 5, rows=4, device="cpu")
    wb = ws.static[5]
    parent, anc = _tree(3, 5)
    ws.begin_step(parent, anc)
    assert ws.current is wb and ws.current_bs == 3
    assert torch.equal(wb.parent[:3], parent.to(torch.int32)) and torch.equal(wb.anc[:3], anc.to(torch.uint8))
    assert (wb.parent[3] == -1).all()  # the padded row keeps a valid tree
    # More requests than the graphs hold, or a width without graphs: buffers of the step's own.
    big = _tree(6, 5)
    ws.begin_step(*big)
    assert ws.current is not wb and not ws.current.static and ws.current.rows == 6
    ws.begin_step(*_tree(2, 7))
    assert not ws.current.static and ws.current.width == 7
    with pytest.raises(RuntimeError, match="6-request"):
        ws.begin_capture(6, 5, rows=6, device="cpu")


def _layer_call(ws, bs, li, n_layers=2, C=6, HV=3, V=2):
    return ws._work_views(ws.current, bs, li, n_layers, torch.arange(bs * ws.current.width * C,
                                                                       dtype=torch.float32).view(-1, C), HV, V)


def test_widths_share_one_storage_made_for_the_most_positions():
    ws = tree_gdn.TreeGdnWorkspace(max_depth=None)
    ws.reserve_positions(8 * 3)  # budget auto: a narrower width captured at more requests
    ws.begin_capture(2, 5, rows=2, device="cpu")
    x5, u5, G5 = _layer_call(ws, 2, 1)
    assert u5.shape == (2, 5, 3, 2) and x5.shape == (10, 6)  # (the tree conv writes x)
    ws.begin_capture(8, 3, rows=8, device="cpu")
    _layer_call(ws, 8, 0)
    a, b = ws.static[5].work, ws.static[3].work
    for name in ("x", "u", "G"):
        assert a[name].data_ptr() == b[name].data_ptr()  # the same memory
    assert ws.storage["u"].numel() == 2 * 24 * 3 * 2  # 24 positions x 2 layers, made once
    # Without the reservation the narrower width's larger need replaces the storage.
    ws2 = tree_gdn.TreeGdnWorkspace(max_depth=None)
    ws2.begin_capture(2, 5, rows=2, device="cpu")
    _layer_call(ws2, 2, 0)
    ws2.begin_capture(8, 3, rows=8, device="cpu")
    _layer_call(ws2, 8, 0)
    assert ws2.static[5].work["u"].data_ptr() != ws2.static[3].work["u"].data_ptr()
    # A step's own buffers never come from the storage.
    ws.begin_step(*_tree(9, 3))
    x, _, _ = _layer_call(ws, 9, 0)
    assert x.data_ptr() != ws.storage["x"].data_ptr()


def test_weight_tables_are_built_once():
    ws = tree_gdn.TreeGdnWorkspace(max_depth=None)
    ws.layers = {i: types.SimpleNamespace(conv_weights=torch.zeros(8, 4), bias=None) for i in range(3)}
    built = [ws._weight_tables(0, 3, torch.float32, "cpu") for _ in range(3)]
    assert built[0] is built[1] is built[2] and list(ws.tables) == [(0, 3)]
    w_tab, b_tab = built[0]
    assert w_tab.tolist() == [ws.layers[i].conv_weights.data_ptr() for i in range(3)] and b_tab is None


def test_layer_runs():
    assert tree_gdn.layer_runs([0, 1, 2, 4, 5, 7]) == [(0, 3), (4, 6), (7, 8)]


def test_commit_without_a_verified_layer_is_refused():
    ws = tree_gdn.TreeGdnWorkspace(max_depth=None)
    ws.begin_step(*_tree(1, 3))
    with pytest.raises(RuntimeError, match="ran no GatedDeltaNet layer"):
        ws.commit(torch.zeros(1, dtype=torch.int64), torch.tensor([[0, -1, -1]]), torch.tensor([0]))


@pytest.mark.parametrize("algo,mode,check,want", [("DDTREE", "wy", False, 1), ("DDTREE", "wy", True, None),
                                                  ("DDTREE", "snapshot", False, None), ("DFLASH", None, False, None)])
def test_scratch_positions(monkeypatch, algo, mode, check, want):
    monkeypatch.setenv("SGLANG_DDTREE_WY_CHECK", "1" if check else "0")
    sa = types.SimpleNamespace(speculative_algorithm=algo, speculative_ddtree_gdn_mode=mode)
    assert tree_gdn.scratch_positions(sa) == want
