"""Budget auto captures each verify width's graphs only for the batch sizes its policy can choose
it at (core/widths.py, engine/verify_widths.py, compat/graph_init.py): a sweep that measures
budget 256 up to 16 requests gets 257-wide graphs up to 16, not 64 — at 64 requests of Qwen3.6-27B
on one GPU those alone would need ~60 GB (engine/verify_memory.py)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from sglang_ddtree.compat import graph_init
from sglang_ddtree.core.budget_policy import BudgetPolicy, StepCostTable
from sglang_ddtree.core.widths import capture_bs_for_cap, max_verify_rows, policy_width_caps, verify_width
from sglang_ddtree.engine import tree_gdn, verify_widths
from sglang_ddtree.engine.verify_memory import MARGIN, MIB, VerifyFootprint, verify_reserve_mb
from sglang_ddtree.engine.verify_widths import capped_decode_bs


def _table(rows):
    """``{config: [concurrencies]}`` -> a table with made-up costs."""
    return StepCostTable({cfg: {c: 10.0 + c for c in cs} for cfg, cs in rows.items()})


def test_caps_follow_the_tables_largest_concurrency_per_budget():
    t = _table({"DDTREE-chain": [1, 4, 16, 64], "DDTREE-8": [1, 4], "DDTREE-16": [1, 4, 16, 64],
                "DDTREE-64": [1, 4, 16], "DDTREE-256": [1, 4, 16]})
    # Budget 8 verifies the draft block's 16 positions, as the chain does: any batch size.
    assert policy_width_caps(t, max_depth=15, block_size=16) == {16: None, 17: 64, 65: 16, 257: 16}
    # Without a chain row the budget measured furthest serves every batch size beyond.
    no_chain = _table({"DDTREE-16": [1, 4, 16], "DDTREE-32": [1, 4, 16], "DDTREE-64": [1, 4]})
    assert policy_width_caps(no_chain, 15, 16) == {17: None, 33: 16, 65: 4}


def test_every_choice_of_the_policy_has_graphs_at_that_batch_size():
    """For random tables: whatever the policy may pick at a batch size, the width's capture covers
    that batch size (a batch pads up to the next captured size)."""
    rng = random.Random(0)
    bs_list = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    for _ in range(200):
        conc = sorted(rng.sample([1, 4, 16, 64], rng.randint(1, 4)))
        rows = {f"DDTREE-{b}": conc[: rng.randint(1, len(conc))] for b in rng.sample([4, 8, 15, 16, 32, 64, 128, 256],
                                                                                  rng.randint(1, 4))}
        if rng.random() < 0.7:
            rows["DDTREE-chain"] = conc
        t = _table(rows)
        caps = policy_width_caps(t, 15, 16)
        policy = BudgetPolicy(t)
        for bs in range(1, 65):
            for c in policy.candidates_at(bs):
                w = verify_width(15 if c == "chain" else c, 16)
                assert w in caps, (rows, c)
                assert max(capture_bs_for_cap(bs_list, caps[w])) >= bs or caps[w] is None, (rows, c, bs, caps)


def test_capture_sizes_and_the_temporary_override():
    assert capture_bs_for_cap([1, 4, 16, 64], None) == [1, 4, 16, 64]
    assert capture_bs_for_cap([64, 1, 16, 4], 16) == [1, 4, 16]
    assert capture_bs_for_cap([1, 4, 16, 64], 10) == [1, 4, 16]  # 10 requests pad to 16
    assert capture_bs_for_cap([1, 4, 16, 64], 100) == [1, 4, 16, 64]
    decode = SimpleNamespace(bs=[1, 4, 16, 64], max_bs=64)
    sa = SimpleNamespace(cuda_graph_config=SimpleNamespace(decode=decode))
    with capped_decode_bs(sa, 4):
        assert (decode.bs, decode.max_bs) == ([1, 4], 4)
    assert (decode.bs, decode.max_bs) == ([1, 4, 16, 64], 64)
    with pytest.raises(RuntimeError), capped_decode_bs(sa, 16):
        raise RuntimeError("a failed capture restores the sizes too")
    assert (decode.bs, decode.max_bs) == ([1, 4, 16, 64], 64)
    with capped_decode_bs(sa, None):
        assert decode.bs == [1, 4, 16, 64]


def test_reserve_counts_each_width_at_its_own_batch():
    fp = VerifyFootprint(logits=1000, logits_model=500, wy=2000, attention=300)
    shared, own = 3000, 800  # logits + wy once; lm_head output + attention per width
    # widths 16 (any), 65 up to 16, 257 up to 16 requests, at 64 requests
    per_width = {65: 16, 257: 16}
    need = verify_reserve_mb(fp, 64, [16, 65, 257], per_width)
    rows = [64 * 16, 16 * 65, 16 * 257]
    assert need * MIB == pytest.approx(MARGIN * (max(rows) * shared + sum(rows) * own))
    assert need < verify_reserve_mb(fp, 64, [16, 65, 257])  # uncapped: 64 x 257 shared
    assert verify_reserve_mb(fp, 8, [16, 257], {257: 16}) == verify_reserve_mb(fp, 8, [16, 257])


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
