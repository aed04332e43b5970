"""The replay lookup (``core/trace_replay.py``): proposals and target tokens equal their plain
references and the offline simulator's (``trace_sim.trace_targets``), the filler token is no
proposal, and a replayed decode loop (states from committed lengths, proposals through the
worker's tree program, target tokens from verify positions, the worker's walk and commit)
accepts per step exactly what ``trace_sim.simulate`` says, for the chain and budgets."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core import trace_sim
from sglang_ddtree.core.step import draft_to_verify, verify_to_commit
from sglang_ddtree.core.trace_replay import (ReplayTable, onehot_logits_, proposals_reference,
                                             targets_reference)
from sglang_ddtree.core.widths import verify_width
from test_trace_sim import OUT7, _random_trace, make_trace, sibling_rows


def _traces(L=5, K=4):
    return [_random_trace(s, L=L, K=K, T=20 + 9 * s) for s in range(4)]


def test_proposals_and_targets_equal_the_references():
    traces = _traces()
    table = ReplayTable.from_traces(traces, vocab_size=512)
    g = torch.Generator().manual_seed(0)
    req = torch.randint(0, 4, (16,), generator=g)
    # states 0 .. T + 2: row 0 and rows past the output read the nearest recorded row
    states = torch.tensor([int(torch.randint(0, int(traces[r].output.shape[0]) + 3, (1,), generator=g))
                           for r in req.tolist()])
    for k in (1, 3, 4):
        lp, ids = table.proposals(req, states, k)
        ref_lp, ref_ids = proposals_reference(traces, req.tolist(), states.tolist(), k)
        assert torch.equal(lp, ref_lp) and torch.equal(ids, ref_ids) and ids.dtype == torch.int64
    chain = proposals_reference(traces, req.tolist(), states.tolist(), 1)[1][..., 0]
    assert torch.equal(table.chain(req, states), chain)
    positions = torch.randint(-3, 90, (16, 7), generator=g)
    assert torch.equal(table.targets(req, positions),
                       targets_reference(traces, req.tolist(), positions.tolist(), table.filler))
    with pytest.raises(ValueError, match="top-5"):
        table.proposals(req, states, 5)


def test_targets_are_the_simulators_at_every_verify_depth():
    traces = _traces()
    table = ReplayTable.from_traces(traces)
    req = torch.tensor([0, 1, 2, 3, 2])
    states = torch.tensor([1, 7, 20, 40, 44])  # the last two near / at the end of request 2's and 3's output
    depth = torch.tensor([[0, 1, 1, 2, 3, 4, 5]]).expand(5, 7)
    prefix = table.prompt_len[req] + states - 1  # committed KV length: the root excluded
    assert torch.equal(table.states(req, prefix), states)
    got = table.targets(req, prefix.view(-1, 1) + depth)
    lens = torch.tensor([int(traces[r].output.shape[0]) for r in req.tolist()])
    outputs = torch.full((5, int(lens.max())), -1)
    for i, r in enumerate(req.tolist()):
        outputs[i, : lens[i]] = traces[r].output.long()
    want = trace_sim.trace_targets(outputs, lens, states, depth)
    assert torch.equal(got, torch.where(want < 0, table.filler, want))
    assert bool((want < 0).any())  # past the end was exercised
    # After the prefill (the prompt's last position) the target's token is output[0].
    first = table.targets(torch.arange(4), table.prompt_len - 1)
    assert first.tolist() == [int(t.output[0]) for t in traces]


def test_filler_is_no_proposal_and_onehot_logits_pick_the_token():
    traces = _traces()
    table = ReplayTable.from_traces(traces, vocab_size=300)
    assert not bool((table.topk_ids == table.filler).any()) and 0 <= table.filler < 300
    logits = torch.randn(3, 300, dtype=torch.bfloat16)
    tok = torch.tensor([5, table.filler, 299])
    onehot_logits_(logits, tok)
    assert torch.equal(logits.argmax(-1), tok)
    assert torch.equal(torch.softmax(logits.float() / 2.0, -1).argmax(-1), tok)
    assert float(torch.softmax(logits.float() / 2.0, -1).max(-1).values.min()) == 1.0
    with pytest.raises(ValueError, match="vocabulary"):
        ReplayTable.from_traces(traces, vocab_size=100)
    short = make_trace([7], L=3, K=2, rows=sibling_rows([7]))
    with pytest.raises(ValueError, match="no recorded proposal"):
        ReplayTable.from_traces([short])


def replay_loop(traces, table: ReplayTable, cfg: trace_sim.SimConfig):
    """A decode loop as an engine runs it under replay: the prefill's token from the target at
    the prompt's last position; per step the states from the committed KV lengths, the trace's
    proposals through the worker's tree program, the target's tokens at the verify positions,
    the worker's walk and commit. Returns per request the accepted drafts per step and the
    committed output, each request stopped after its trace's output length."""
    L, K = table.depth, table.topk
    budget, topk, depth = cfg.resolve(L, K)
    width = verify_width(budget, L + 1)
    n = len(traces)
    req = torch.arange(n)
    T = table.out_len
    out = [[int(x)] for x in table.targets(req, table.prompt_len - 1).tolist()]
    root = table.targets(req, table.prompt_len - 1)
    seq = table.prompt_len.clone()  # committed KV length of the next step (the root excluded)
    drafts = [[] for _ in range(n)]
    while any(len(o) < int(t) for o, t in zip(out, T.tolist())):
        state = table.states(req, seq)
        lp, ids = table.proposals(req, state, topk)
        _, layout = draft_to_verify(lp, ids, root, seq, budget, width, max_siblings=topk, max_depth=depth)
        target = table.targets(req, layout.positions)
        window = torch.arange(n * width).view(n, width)
        acc, plan = verify_to_commit(layout, target, L, window)
        for b in range(n):
            if len(out[b]) < int(T[b]):
                drafts[b].append(int(acc.accept_len[b]))
                c = int(plan.commit_lens[b])
                out[b] += plan.out_tokens[b, :c].tolist()
        root = plan.bonus
        seq = seq + plan.commit_lens.long()
    return drafts, [o[: int(t)] for o, t in zip(out, T.tolist())]


@pytest.mark.parametrize("cfg", [trace_sim.CHAIN, trace_sim.SimConfig(budget=6), trace_sim.SimConfig(budget=16),
                                 trace_sim.SimConfig(budget=24, topk=2, max_depth=4)],
                         ids=lambda c: c.label)
def test_a_replayed_decode_loop_accepts_what_the_simulator_says(cfg):
    traces = _traces() + [make_trace(OUT7, L=5, K=4, rows=lambda p, d: [OUT7[p + d - 1] if p + d - 1 < 7 else 90 + d,
                                                                          91 + d, 92 + d, 93 + d][:4])]
    table = ReplayTable.from_traces(traces)
    drafts, outputs = replay_loop(traces, table, cfg)
    sims = trace_sim.simulate(traces, cfg)
    for tr, res, d, o in zip(traces, sims, drafts, outputs):
        assert o == tr.output.tolist()
        # exact at censored steps too: past the output the target's token is the filler
        assert d == res.drafts, (tr.rid, d, res.drafts)
    assert sum(sum(d) for d in drafts) > 0
