"""The trace format and the offline simulator: hand-computed steps (the chain against a tree that
accepts a second-ranked sibling, the end of the output), the simulator's trees equal the tree
builder's on the same inputs, and its accept lengths equal a plain reference walk on random
traces."""

from __future__ import annotations

import math
import random

import pytest
import torch

from sglang_ddtree.core.trace_sim import (CHAIN, SimConfig, drafts_histogram, simulate, step_trees, tokens_per_step,
                                          trace_targets)
from sglang_ddtree.core.traces import FORMAT, RequestTrace, TraceSet
from sglang_ddtree.core.tree_builder import build_tree_reference, pad_tree

LP = [math.log(0.9), math.log(0.05), math.log(0.03), math.log(0.02)]


def make_trace(output, L, K, rows, prompt=(1, 2, 3), rid="r"):
    """A trace whose proposal at state p, depth d is ``rows(p, d)``: K distinct token ids, best
    first, with log-probs ``LP[:K]``."""
    T = len(output)
    lp = torch.full((T, L, K), float("-inf"))
    ids = torch.full((T, L, K), -1, dtype=torch.int32)
    for p in range(1, T):
        for d in range(1, L + 1):
            row = rows(p, d)
            assert len(set(row)) == K
            ids[p, d - 1] = torch.tensor(row, dtype=torch.int32)
            lp[p, d - 1] = torch.tensor(LP[:K])
    return RequestTrace(rid=rid, prompt=torch.tensor(prompt, dtype=torch.int32),
                        output=torch.tensor(output, dtype=torch.int32), topk_logprobs=lp, topk_ids=ids,
                        finish_reason="length")


def truth(output, p, d):
    """The output token a depth-d node from state p must carry, None past the output."""
    i = p + d - 1
    return output[i] if i < len(output) else None


OUT7 = [10, 11, 12, 13, 14, 15, 16]


def sibling_rows(output):
    """Depth 1: a wrong token at rank 0, the true one at rank 1; deeper: the true one at rank 0."""
    def rows(p, d):
        t = truth(output, p, d)
        wrong = [100 + d, 200 + d, 300 + d]
        if t is None:
            return [400 + d] + wrong[:1]
        return [wrong[0], t] if d == 1 else [t, wrong[0]]
    return rows


def test_chain_accepts_nothing_where_a_tree_accepts_the_second_sibling():
    trace = make_trace(OUT7, L=3, K=2, rows=sibling_rows(OUT7))
    (chain,) = simulate([trace], CHAIN)
    assert chain.states == [1, 2, 3, 4, 5, 6]
    assert chain.drafts == [0] * 6 and chain.committed == [1] * 6 and not any(chain.censored)
    assert chain.spec_accept_length == 7 / 6 and chain.mean_accept_length == 1.0
    # Budget 4: the chain of 3 plus the depth-1 sibling (score log .05 beats every deeper
    # non-chain node): the sibling is accepted, its child is not in the tree.
    (b4,) = simulate([trace], SimConfig(budget=4))
    assert b4.states == [1, 3, 5] and b4.drafts == [1, 1, 1] and b4.committed == [2, 2, 2]
    # Budget 6: nodes 5 and 6 are (r0, r1) and (r1, r0), equal scores, the former first (its
    # parent comes first): the sibling's child is in, two drafts a step.
    (b6,) = simulate([trace], SimConfig(budget=6))
    assert b6.states == [1, 4] and b6.drafts == [2, 2] and b6.committed == [3, 3] and not any(b6.censored)
    # The whole tree (2 + 4 + 8 nodes): the sibling's path to depth 3; at state 5 only two
    # output tokens are left: both accepted, the step is censored and commits 2.
    (full,) = simulate([trace], SimConfig(budget=14))
    assert full.states == [1, 5] and full.drafts == [3, 2] and full.committed == [4, 2]
    assert full.censored == [False, True] and full.spec_accept_length == 7 / 2
    assert drafts_histogram(full) == [0, 0, 1, 1]
    # Top-1 caps siblings: whatever the budget, it is the chain.
    (top1,) = simulate([trace], SimConfig(budget=14, topk=1))
    assert top1.drafts == chain.drafts


def test_end_of_output_commits_only_what_exists():
    out = [10, 11, 12, 13, 14, 15]

    def rows(p, d):
        t = truth(out, p, d)
        return [t if t is not None else 500 + d, 600 + d]

    (r,) = simulate([make_trace(out, L=3, K=2, rows=rows)], CHAIN)
    # state 1: drafts 11 12 13 accepted, bonus 14 -> state 5; one token left (15): its draft is
    # accepted, the bonus would be past the output.
    assert r.states == [1, 5] and r.drafts == [3, 1] and r.committed == [4, 1] and r.censored == [False, True]
    assert sum(r.committed) == len(out) - 1 and r.mean_accept_length == 2.5
    # An output of one token: the prefill made it, no step.
    (one,) = simulate([make_trace([7], L=3, K=2, rows=rows)], CHAIN)
    assert one.steps == 0 and one.spec_accept_length == 1.0


def test_max_depth_caps_the_path():
    out = list(range(10, 30))

    def rows(p, d):
        t = truth(out, p, d)
        return [t if t is not None else 500 + d, 600 + d]

    trace = make_trace(out, L=4, K=2, rows=rows)
    (deep,) = simulate([trace], SimConfig(budget=8))
    (capped,) = simulate([trace], SimConfig(budget=8, max_depth=2))
    assert deep.drafts[0] == 4 and capped.drafts[0] == 2
    assert all(a <= 2 for a in capped.drafts) and sum(capped.committed) == len(out) - 1


def test_trace_targets_are_the_output_at_state_plus_depth():
    outputs = torch.tensor([[5, 6, 7, 8], [9, 10, -1, -1]])
    depth = torch.tensor([[0, 1, 1, 2, 3], [0, 1, 2, 0, 1]])
    got = trace_targets(outputs, torch.tensor([4, 2]), torch.tensor([1, 1]), depth)
    assert got.tolist() == [[6, 7, 7, 8, -1], [10, -1, -1, 10, -1]]


def _random_trace(seed, L, K, T, hit=0.7):
    """A noisy drafter: at each depth the true token at a random rank with probability ``hit``."""
    rng = random.Random(seed)
    out = [rng.randrange(50) for _ in range(T)]

    def rows(p, d):
        t = truth(out, p, d)
        row = rng.sample([x for x in range(60, 200) if x != t], K)
        if t is not None and rng.random() < hit:
            row[rng.randrange(K)] = t
        return row

    tr = make_trace(out, L, K, rows, rid=f"s{seed}")
    g = torch.Generator().manual_seed(seed)  # distinct sorted log-probs per depth
    lp = torch.sort(torch.log_softmax(torch.randn(T, L, 64, generator=g), -1), -1, descending=True).values[..., :K]
    tr.topk_logprobs = torch.where(torch.isneginf(tr.topk_logprobs), tr.topk_logprobs, lp)
    return tr


def _reference_step(trace, p, cfg):
    """Plain walk of the reference tree: the deepest node whose path is output[p : p + d]."""
    L, K = trace.depth, trace.topk
    budget, topk, depth = cfg.resolve(L, K)
    tree = build_tree_reference(trace.topk_logprobs[p][None], trace.topk_ids[p][None].long(), budget, topk, depth)
    out, T = trace.output.tolist(), int(trace.output.shape[0])
    best = 0
    for i in range(budget):
        d = int(tree.depth[0, i])
        if d <= 0:
            continue
        path, j = [], i
        while j >= 0:
            path.append(int(tree.token[0, j]))
            j = int(tree.parent[0, j])
        if p + d <= T and path[::-1] == out[p: p + d]:
            best = max(best, d)
    return best


@pytest.mark.parametrize("cfg", [CHAIN, SimConfig(budget=5), SimConfig(budget=16, topk=3),
                                 SimConfig(budget=24, max_depth=3), SimConfig(budget=1)])
def test_simulator_equals_a_plain_reference_walk(cfg):
    traces = [_random_trace(s, L=5, K=4, T=30 + 7 * s) for s in range(4)]
    results = simulate(traces, cfg)
    total = 0
    for tr, res in zip(traces, results):
        p, T = 1, int(tr.output.shape[0])
        for state, a, c, cens in zip(res.states, res.drafts, res.committed, res.censored):
            assert state == p
            want = _reference_step(tr, p, cfg)
            assert a == want, (tr.rid, p)
            assert c == min(want + 1, T - p) and cens == (want == T - p)
            p += c
        assert p == T
        total += sum(res.drafts)
    assert total > 0  # the noisy drafter gets drafts accepted
    assert tokens_per_step(results) == sum(r.output_len for r in results) / sum(r.steps for r in results)


@pytest.mark.parametrize("cfg", [CHAIN, SimConfig(budget=7), SimConfig(budget=20, topk=2, max_depth=4)])
def test_simulator_tree_equals_the_tree_builder(cfg):
    traces = [_random_trace(s, L=5, K=4, T=12) for s in range(3)]
    states = [3, 1, 11]
    tree, layout, L = step_trees(traces, states, cfg)
    budget, topk, depth = cfg.resolve(5, 4)
    lp = torch.stack([t.topk_logprobs[p] for t, p in zip(traces, states)])
    ids = torch.stack([t.topk_ids[p] for t, p in zip(traces, states)]).long()
    ref = pad_tree(build_tree_reference(lp, ids, budget, topk, depth), tree.depth.shape[1])
    for f in ("depth", "parent", "rank", "token", "score"):
        assert torch.equal(getattr(tree, f), getattr(ref, f)), f
    assert L == 5 and layout.tokens.shape[1] == max(budget + 1, 6)
    assert layout.tokens[:, 0].tolist() == [int(t.output[p - 1]) for t, p in zip(traces, states)]


def test_configurations_the_trace_cannot_answer_are_refused():
    with pytest.raises(ValueError, match="topk"):
        SimConfig(budget=8, topk=9).resolve(15, 8)
    with pytest.raises(ValueError, match="max_depth"):
        SimConfig(budget=8, max_depth=16).resolve(15, 8)
    assert CHAIN.resolve(15, 8) == (15, 1, 15) and CHAIN.label == "chain"
    assert SimConfig(budget=32).label == "DDTREE-32"


def test_trace_file_round_trip_and_validation(tmp_path):
    tr = make_trace(OUT7, L=3, K=2, rows=sibling_rows(OUT7))
    ts = TraceSet(meta={"prompt_set": "synthetic", "topk": 2}, requests=[tr])
    ts.save(tmp_path / "t.pt")
    raw = torch.load(tmp_path / "t.pt", weights_only=True)
    assert raw["format"] == FORMAT
    back = TraceSet.load(tmp_path / "t.pt")
    assert back.meta == ts.meta and back.positions == 6
    assert torch.equal(back.requests[0].topk_ids, tr.topk_ids)
    assert torch.equal(back.requests[0].topk_logprobs, tr.topk_logprobs)
    bad = make_trace(OUT7, L=3, K=2, rows=sibling_rows(OUT7))
    bad.topk_logprobs[2, 1] = torch.tensor([-3.0, -0.1])
    with pytest.raises(ValueError, match="sorted"):
        bad.validate()
    bad = make_trace(OUT7, L=3, K=2, rows=sibling_rows(OUT7))
    bad.topk_ids[0, 0, 0] = 5
    with pytest.raises(ValueError, match="row 0"):
        bad.validate()
    bad = make_trace(OUT7, L=3, K=2, rows=sibling_rows(OUT7))
    bad.topk_ids = bad.topk_ids[:-1]
    with pytest.raises(ValueError, match="not \\[T=7"):
        bad.validate()
    with pytest.raises(ValueError, match="plain"):
        TraceSet(meta={"torch": torch.__version__}, requests=[tr]).validate()
    with pytest.raises(ValueError, match="mixes"):
        TraceSet(meta={}, requests=[tr, make_trace(OUT7, L=2, K=2, rows=sibling_rows(OUT7))]).validate()
