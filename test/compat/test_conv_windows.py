"""DDTREE keeps sglang's dense per-position conv windows on hybrid targets.

sglang's deduplicated sliding-window layout (``conv_window_dedup_enabled``) is only correct for
chains; with DDTREE (which keeps ``speculative_eagle_topk`` at 1) it corrupts the committed conv
state on bushy trees. The hook in ``compat/conv_windows.py`` must turn it off for DDTREE servers and leave every other server alone. The overlap itself is shown
on the view sglang builds: with the dedup layout, a root-child's window store lands in the
root's window."""

from __future__ import annotations

import copy
import types

import pytest
import torch

from sglang_ddtree.compat import conv_windows


def _publish(monkeypatch, algo):
    import sglang.srt.runtime_context as rc

    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm=algo))


@pytest.mark.parametrize("algo,want", [("DDTREE", False), ("DFLASH", True), (None, True)])
def test_dedup_layout_off_only_for_ddtree(monkeypatch, algo, want):
    from sglang.srt.mem_cache import memory_pool

    _publish(monkeypatch, algo)
    orig = memory_pool.conv_window_dedup_enabled
    got = conv_windows._dense_conv_windows_for_trees(orig, False, False, 1, False)
    assert got is want
    # Where upstream already refuses (EAGLE trees), the hook never turns it on.
    assert conv_windows._dense_conv_windows_for_trees(orig, False, False, 4, False) is False


def test_hook_is_registered_on_the_pool_function(monkeypatch):
    from sglang.srt.plugins.hook_registry import HookRegistry

    # A registry of its own: the plugin's registration (other tests) stays as a server has it.
    own = copy.copy(HookRegistry._hooks)  # same mapping type (sglang's is a defaultdict)
    for target in own:
        own[target] = list(own[target])
    monkeypatch.setattr(HookRegistry, "_hooks", own)
    conv_windows.register_conv_window_hook()
    hooks = HookRegistry._hooks.get(conv_windows.TARGET, [])
    assert any(h is conv_windows._dense_conv_windows_for_trees for _, h, _ in hooks)


def test_unpublished_server_args_mean_not_ddtree(monkeypatch):
    import sglang.srt.runtime_context as rc

    def boom():
        raise ValueError("Global server args is not set yet!")

    monkeypatch.setattr(rc, "get_server_args", boom)
    from sglang_ddtree.server_args import is_ddtree_server

    assert is_ddtree_server() is False


def test_overlapping_windows_break_a_tree():
    """The failure mode, on a [D + K - 2]-column buffer viewed as D overlapping K-1 windows (what
    sglang's dedup layout is): the root's window [c1, c2, x0] is clobbered when node 2, a
    second child of the root, stores its own window [c2, x0, x2] one column to the right."""
    K1, D = 3, 4
    shared = torch.zeros(D + K1 - 1)
    view = shared.as_strided((D, K1), (1, 1))
    c1, c2, x0, x1, x2 = 1.0, 2.0, 10.0, 11.0, 12.0
    view[0] = torch.tensor([c1, c2, x0])    # root
    view[1] = torch.tensor([c2, x0, x1])    # node 1, child of root
    view[2] = torch.tensor([c2, x0, x2])    # node 2, also a child of the root
    assert view[0].tolist() != [c1, c2, x0]  # the root's committed window is gone
    dense = torch.zeros(D, K1)
    dense[0], dense[2] = torch.tensor([c1, c2, x0]), torch.tensor([c2, x0, x2])
    assert dense[0].tolist() == [c1, c2, x0]
