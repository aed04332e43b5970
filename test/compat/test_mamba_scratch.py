"""compat/mamba_scratch.py: in --speculative-ddtree-gdn-mode wy the linear-attention pool and its
memory reservation see one verify position (no per-node state scratch), only for DDTREE wy
servers and only inside those calls. (GPU: the wy cases of gpu_cases.py log the pool sizes.)"""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.compat import mamba_scratch


def _serve(monkeypatch, algo="DDTREE", mode="wy"):
    import sglang.srt.runtime_context as rc

    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(
        speculative_algorithm=algo, speculative_ddtree_gdn_mode=mode))


def _seen(self, *args, **kwargs):
    return kwargs.get("speculative_num_draft_tokens")


@pytest.mark.parametrize("algo,mode,want", [("DDTREE", "wy", 1), ("DDTREE", "snapshot", 65), ("DFLASH", None, 65)])
def test_pool_scratch_positions(monkeypatch, algo, mode, want):
    _serve(monkeypatch, algo, mode)
    assert mamba_scratch._pool_init(_seen, None, size=4, speculative_num_draft_tokens=65) == want
    # A pool built without speculation stays without scratch.
    assert mamba_scratch._pool_init(_seen, None, size=4, speculative_num_draft_tokens=None) is None


@pytest.mark.parametrize("mode,want", [("wy", 1), ("snapshot", 65)])
def test_planner_sees_one_position_only_inside_the_call(monkeypatch, mode, want):
    import sglang.srt.runtime_context as rc

    bag = rc._ConfigBag("spec")
    bag._set("speculative_num_draft_tokens", 65)
    monkeypatch.setattr(rc, "get_spec", lambda: bag)
    _serve(monkeypatch, "DDTREE", mode)
    got = mamba_scratch._planner(lambda self: rc.get_spec().speculative_num_draft_tokens, None)
    assert got == want
    assert bag.speculative_num_draft_tokens == 65  # restored


def test_target_verify_graphs_are_not_captured_while_verify_is_eager():
    from sglang_ddtree.compat import graph_init

    cap = lambda self, capture_decode_cuda_graph=True: capture_decode_cuda_graph  # noqa: E731

    def runner(draft=False, eager=True, algo="DDTREE"):
        sa = types.SimpleNamespace(speculative_algorithm=algo, speculative_ddtree_eager_verify=eager,
                                   speculative_ddtree_step_cost=None,
                                   cuda_graph_config=types.SimpleNamespace(decode=types.SimpleNamespace(bs=[1])))
        return types.SimpleNamespace(is_draft_worker=draft, server_args=sa)

    assert graph_init.init_cuda_graphs(cap, runner()) is False
    assert graph_init.init_cuda_graphs(cap, runner(), True) is False
    assert graph_init.init_cuda_graphs(cap, runner(draft=True)) is True
    assert graph_init.init_cuda_graphs(cap, runner(eager=False)) is True  # the default graph verify
    assert graph_init.init_cuda_graphs(cap, runner(algo="DFLASH")) is True
