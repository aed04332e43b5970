"""engine/verify_graph.py and compat/graph_guard.py: the capture-time verify input of a DDTREE
target gets the runner's mask buffer (never for the drafter, other algorithms, or under
--speculative-ddtree-eager-verify); wy hybrid captures set up the workspace's static tree of the
captured width; the graph guard keeps DDTREE verifies off graphs only under the flag. (The
replay itself is GPU-only: gpu_cases ddtree16-llama-oracle-sibling-graphs / -nomask.)"""

from __future__ import annotations

import types

import torch

from sglang_ddtree.compat.graph_guard import no_graph_for_eager_tree_verify
from sglang_ddtree.engine import tree_gdn
from sglang_ddtree.engine import verify_graph as vg


def _publish(monkeypatch, **kw):
    import sglang.srt.runtime_context as rc

    sa = types.SimpleNamespace(**{"speculative_algorithm": "DDTREE", **kw})
    monkeypatch.setattr(rc, "get_server_args", lambda: sa)
    tree_gdn.reset_workspace()
    return sa


def _runner(draft=False, hybrid=False, max_bs=4, width=5):
    attn = types.SimpleNamespace(linear_attn_backend=object()) if hybrid else types.SimpleNamespace()
    return types.SimpleNamespace(
        model_runner=types.SimpleNamespace(is_draft_worker=draft, attn_backend=attn),
        buffers=types.SimpleNamespace(custom_mask=torch.ones(8, dtype=torch.bool), input_ids=torch.zeros(4)),
        captured_req_width=width, max_bs=max_bs)


def _spec():
    return types.SimpleNamespace(custom_mask=None, draft_token_num=17)


def test_capture_gets_the_mask_buffer_unless_eager(monkeypatch):
    _publish(monkeypatch, speculative_ddtree_eager_verify=True)
    assert vg.capture_spec_info(_runner(), _spec(), 17).custom_mask is None
    _publish(monkeypatch)  # the default: graphs with the mask
    spec, runner = _spec(), _runner()
    got = vg.capture_spec_info(runner, spec, 17)
    assert got.custom_mask is runner.buffers.custom_mask and got.draft_token_num == 17
    assert spec.custom_mask is None  # a copy: the runner's own object is untouched
    assert vg.capture_spec_info(_runner(draft=True), _spec(), 17).custom_mask is None
    assert vg.capture_spec_info(runner, None, 17) is None


def test_other_algorithms_are_left_alone(monkeypatch):
    _publish(monkeypatch, speculative_algorithm="DFLASH")
    spec = _spec()
    assert vg.capture_spec_info(_runner(), spec, 17) is spec and spec.custom_mask is None


def test_graph_guard_follows_the_flag(monkeypatch):
    from sglang_ddtree.verify_info import DDTreeVerifyInput

    fb = types.SimpleNamespace(spec_info=object.__new__(DDTreeVerifyInput))
    original = lambda self, forward_batch: "sglang decides"  # noqa: E731
    _publish(monkeypatch, speculative_ddtree_eager_verify=True)
    assert no_graph_for_eager_tree_verify(original, None, fb) is False
    # Other forwards (the drafter's, prefill) keep sglang's decision even under the flag.
    assert no_graph_for_eager_tree_verify(original, None, types.SimpleNamespace(spec_info=None)) == "sglang decides"
    _publish(monkeypatch)
    assert no_graph_for_eager_tree_verify(original, None, fb) == "sglang decides"


def test_target_capture_is_skipped_only_for_eager_ddtree_targets():
    sa = lambda **kw: types.SimpleNamespace(**{"speculative_algorithm": "DDTREE", **kw})  # noqa: E731
    mr = lambda sa, draft=False: types.SimpleNamespace(server_args=sa, is_draft_worker=draft)  # noqa: E731
    assert vg.skip_target_capture(mr(sa(speculative_ddtree_eager_verify=True))) is True
    assert vg.skip_target_capture(mr(sa(speculative_ddtree_eager_verify=True), draft=True)) is False
    assert vg.skip_target_capture(mr(sa())) is False
    assert vg.skip_target_capture(mr(sa(speculative_algorithm="DFLASH", speculative_ddtree_eager_verify=True))) is False


def test_wy_captures_read_the_static_tree_of_their_width(monkeypatch):
    _publish(monkeypatch, speculative_ddtree_gdn_mode="wy", speculative_ddtree_max_depth=4)
    runner = _runner(hybrid=True)
    vg.capture_spec_info(runner, _spec(), 2 * 5)  # sglang captures each batch size of the width
    ws = tree_gdn.workspace()
    assert ws.current_bs == 2 and ws.current.width == 5 and ws.current.static and ws.max_depth == 4
    vg.capture_spec_info(runner, _spec(), 4 * 5)
    wb = ws.static[5]
    assert ws.current is wb and ws.current_bs == 4 and wb.rows == runner.max_bs
    assert (wb.parent == -1).all() and torch.equal(wb.anc[1], torch.eye(5, dtype=torch.uint8))
    # Attention-only targets and the snapshot mode set up no tree.
    _publish(monkeypatch, speculative_ddtree_gdn_mode="wy")
    vg.capture_spec_info(_runner(), _spec(), 10)
    assert tree_gdn.workspace().static == {}
    _publish(monkeypatch, speculative_ddtree_gdn_mode="snapshot")
    vg.capture_spec_info(_runner(hybrid=True), _spec(), 10)
    assert tree_gdn.workspace().static == {}
    tree_gdn.reset_workspace()
