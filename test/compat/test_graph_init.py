"""compat/graph_init.py (with engine/verify_widths.py): under budget auto sglang's own verify
runner (the widest width) captures only up to its cap, one logits buffer is sized for every width's
graphs, and the tree GatedDeltaNet workspace reserves as many positions; the drafter and a fixed
budget are left alone; the cap of sglang's decode batch sizes is temporary."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_ddtree.compat import graph_init
from sglang_ddtree.core.widths import max_verify_rows
from sglang_ddtree.engine import tree_gdn, verify_widths
from sglang_ddtree.engine.verify_widths import capped_decode_bs


def test_capped_decode_bs_is_temporary():
    decode = SimpleNamespace(bs=[1, 4, 16, 64], max_bs=64)
    sa = SimpleNamespace(decode=decode)
    with capped_decode_bs(sa, 4):
        assert (decode.bs, decode.max_bs) == ([1, 4], 4)
    assert (decode.bs, decode.max_bs) == ([1, 4, 16, 64], 64)
    with pytest.raises(RuntimeError), capped_decode_bs(sa, 16):
        raise RuntimeError("a failed capture restores the sizes too")
    assert (decode.bs, decode.max_bs) == ([1, 4, 16, 64], 64)
    with capped_decode_bs(sa, None):
        assert decode.bs == [1, 4, 16, 64]


@pytest.mark.ddtree_cuda_path
def test_main_runner_capture_is_capped_and_the_logits_buffer_sized_for_every_width(monkeypatch, tmp_path):
    """The hook around ``ModelRunner.init_cuda_graphs``: sglang's own runner (the widest width)
    captures only up to its cap, and the shared logits buffer holds the largest width x batch any
    width's graphs use (here budget 64's 65 x 16 = 1040, beside the chain's 16 x 64 and 257 x 4)."""
    import json

    from sglang.srt.model_executor.graph_shared_output import GraphSharedOutput

    table = tmp_path / "sc.json"
    table.write_text(json.dumps({"rows": [
        {"config": cfg, "concurrency": c, "ms_per_step": 10.0 + c}
        for cfg, cs in {"DDTREE-chain": [1, 4, 16, 64], "DDTREE-64": [1, 4, 16], "DDTREE-256": [1, 4]}.items()
        for c in cs]}))
    monkeypatch.setattr(verify_widths, "published_drafter_block_size", lambda: 16)
    tree_gdn.reset_workspace()
    monkeypatch.setattr(GraphSharedOutput, "_process_shared", None)
    decode = SimpleNamespace(bs=[1, 4, 16, 64], max_bs=64)
    sa = SimpleNamespace(speculative_algorithm="DDTREE", speculative_ddtree_step_cost=str(table),
                         speculative_ddtree_max_depth=15, speculative_num_draft_tokens=257,
                         cuda_graph_config=SimpleNamespace(decode=decode))
    runner = SimpleNamespace(server_args=sa, is_draft_worker=False, device="cpu")
    seen = {}

    def original(self):
        seen["bs"] = list(decode.bs)
        seen["rows"] = GraphSharedOutput._process_shared.max_rows
        return "captured"

    assert graph_init.init_cuda_graphs(original, runner) == "captured"
    assert seen == {"bs": [1, 4], "rows": max(64 * 16, 16 * 65, 4 * 257)}
    assert max_verify_rows([1, 4, 16, 64], {16: None, 65: 16, 257: 4}) == seen["rows"]
    assert tree_gdn.workspace().storage_positions == seen["rows"]  # the wy commit inputs' storage too
    tree_gdn.reset_workspace()
    assert decode.bs == [1, 4, 16, 64] and decode.max_bs == 64
    # The draft's runner, and a fixed budget, are left alone.
    seen.clear()
    graph_init.init_cuda_graphs(original, SimpleNamespace(**{**vars(runner), "is_draft_worker": True}))
    assert seen["bs"] == [1, 4, 16, 64]
    fixed = SimpleNamespace(**{**vars(sa), "speculative_ddtree_step_cost": None})
    graph_init.init_cuda_graphs(original, SimpleNamespace(**{**vars(runner), "server_args": fixed}))
    assert seen["bs"] == [1, 4, 16, 64]
