"""compat/wy_pool.py: in --speculative-ddtree-gdn-mode wy the linear-attention pool and its
memory reservation see one verify position (no per-node state scratch), only for DDTREE wy
servers and only inside those calls; the target's verify graphs are not captured while the tree
verify is eager. (GPU: the wy cases of gpu_cases.py log the pool sizes.)"""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.compat import verify_graph as vg
from sglang_ddtree.compat import wy_pool


def _serve(monkeypatch, algo="DDTREE", mode="wy"):
    import sglang.srt.runtime_context as rc

    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm=algo, speculative_ddtree_gdn_mode=mode))


def _seen(self, *args, **kwargs):
    return kwargs.get("speculative_num_draft_tokens")


@pytest.mark.parametrize("algo,mode,want", [("DDTREE", "wy", 1), ("DDTREE", "snapshot", 65), ("DFLASH", None, 65)])
def test_pool_scratch_positions(monkeypatch, algo, mode, want):
    _serve(monkeypatch, algo, mode)
    assert wy_pool._pool_init(_seen, None, size=4, speculative_num_draft_tokens=65) == want
    # A pool built without speculation stays without scratch.
    assert wy_pool._pool_init(_seen, None, size=4, speculative_num_draft_tokens=None) is None


@pytest.mark.parametrize("mode,want", [("wy", 1), ("snapshot", 65)])
def test_planner_sees_one_position_only_inside_the_call(monkeypatch, mode, want):
    import sglang.srt.runtime_context as rc

    bag = rc._ConfigBag("spec")
    bag._set("speculative_num_draft_tokens", 65)
    monkeypatch.setattr(rc, "get_spec", lambda: bag)
    _serve(monkeypatch, "DDTREE", mode)
    got = wy_pool._planner(lambda self: rc.get_spec().speculative_num_draft_tokens, None)
    assert got == want
    assert bag.speculative_num_draft_tokens == 65  # restored


def test_target_verify_graphs_are_not_captured_while_verify_is_eager(monkeypatch):
    _serve(monkeypatch, "DDTREE", "snapshot")
    cap = lambda self, capture_decode_cuda_graph=True: capture_decode_cuda_graph  # noqa: E731
    target, drafter = types.SimpleNamespace(is_draft_worker=False), types.SimpleNamespace(is_draft_worker=True)
    monkeypatch.setenv(vg.GRAPH_ENV, "0")  # eager tree verify: never replayed, not captured
    assert wy_pool.init_cuda_graphs_eager_skip(cap, target) is False
    assert wy_pool.init_cuda_graphs_eager_skip(cap, target, True) is False
    assert wy_pool.init_cuda_graphs_eager_skip(cap, drafter) is True
    monkeypatch.delenv(vg.GRAPH_ENV)  # the default graph verify replays them: captured
    assert wy_pool.init_cuda_graphs_eager_skip(cap, target) is True
    monkeypatch.setenv(vg.GRAPH_ENV, "0")
    _serve(monkeypatch, "DFLASH", None)
    assert wy_pool.init_cuda_graphs_eager_skip(cap, target) is True


def test_weight_tables_are_built_once_across_eager_steps():
    """Each eager wy step has a fresh WyVerifyState; the conv weight address tables (a
    host-to-device copy each time they are built) come from the worker's cache after the first."""
    import torch

    from sglang_ddtree.compat import gdn_wy

    layers = [types.SimpleNamespace(conv_weights=torch.zeros(8, 4), bias=None) for _ in range(3)]
    lay = types.SimpleNamespace(parent=torch.tensor([[-1, 0]]), ancestor_mask=torch.eye(2, dtype=torch.bool)[None])
    cache = {}
    built = []
    for _ in range(3):  # three steps
        wy = gdn_wy.WyVerifyState.from_layout(lay, tables=cache)
        wy.saved = {i: (layers[i], None, None) for i in range(3)}
        wy.work["x"] = torch.zeros(3, 2, 8)
        built.append(gdn_wy._weight_tables(wy, 0, 3))
    assert built[0] is built[1] is built[2] and list(cache) == ["tables0:3"]
    w_tab, b_tab = built[0]
    assert w_tab.tolist() == [l.conv_weights.data_ptr() for l in layers] and b_tab is None
    # Without a cache (tests, one-off calls) a step keeps its own.
    assert gdn_wy.WyVerifyState.from_layout(lay).tables == {}
