"""core/commit_plan.py and core/step.py: the served KV commit (the window path first) against a
plain per-request reference, with hard-coded cases for non-contiguous accepted paths, rows that
accept nothing beside rows that accept the whole depth (requests finishing in the middle of a
batch), and padded windows; and the step program end to end on random trees."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from sglang_ddtree.core.accept import Acceptance, tree_walk
from sglang_ddtree.core.commit_plan import build_commit_plan, build_commit_plan_reference, path_first_permutation
from sglang_ddtree.core.step import draft_to_verify, verify_to_commit


def _acc(accepted, accept_len, new_tokens):
    accepted, accept_len = torch.tensor(accepted), torch.tensor(accept_len)
    return Acceptance(accepted=accepted, accept_len=accept_len, new_tokens=torch.tensor(new_tokens),
                      num_new=accept_len + 1)


def test_permutation_puts_the_path_first_then_the_rest_in_position_order():
    # Row 0: a non-contiguous path 0 -> 2 -> 5; row 1: nothing accepted; row 2: a chain 0..3.
    accepted = torch.tensor([[0, 2, 5, -1], [0, -1, -1, -1], [0, 1, 2, 3]])
    perm = path_first_permutation(accepted, 6)
    assert perm.tolist() == [[0, 2, 5, 1, 3, 4], [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]]


def test_plan_hard_coded_non_contiguous_paths_and_mid_batch_finishes():
    window = torch.tensor([[100, 101, 102, 103, 104, 105],
                           [200, 201, 202, 203, 204, 205],
                           [300, 301, 302, 303, 304, 305]])
    acc = _acc(accepted=[[0, 4, 5, -1], [0, -1, -1, -1], [0, 3, -1, -1]], accept_len=[2, 0, 1],
               new_tokens=[[11, 12, 13, -1], [21, -1, -1, -1], [31, 32, -1, -1]])
    plan = build_commit_plan(acc, window)
    assert plan.new_window.tolist() == [[100, 104, 105, 101, 102, 103],
                                        [200, 201, 202, 203, 204, 205],
                                        [300, 303, 301, 302, 304, 305]]
    assert plan.path_slots.tolist() == [[100, 104, 105, 101], [200, 201, 202, 203], [300, 303, 301, 302]]
    assert plan.path_index.tolist() == [[0, 4, 5, 0], [0, 0, 0, 0], [0, 3, 0, 0]]
    assert plan.commit_lens.dtype == torch.int32 and plan.commit_lens.tolist() == [3, 1, 2]
    assert plan.bonus.tolist() == [13, 21, 32]
    assert plan.out_tokens.tolist() == [[11, 12, 13, 0, 0, 0], [21, 0, 0, 0, 0, 0], [31, 32, 0, 0, 0, 0]]
    ref = build_commit_plan_reference(acc.accepted.tolist(), acc.accept_len.tolist(), acc.new_tokens.tolist(),
                                      window.tolist())
    assert ref["new_window"] == plan.new_window.tolist()


def test_wrong_order_of_right_slots_is_not_a_permutation_of_positions():
    """The radix cache stores req_to_token by position: the same slots in another order are a
    different sequence, so the plan must match the reference entry by entry, not as a set."""
    window = torch.arange(10, 16).view(1, 6)
    acc = _acc([[0, 2, 3, -1]], [2], [[7, 8, 9, -1]])
    got = build_commit_plan(acc, window).new_window[0].tolist()
    assert got == [10, 12, 13, 11, 14, 15]
    assert got != [10, 12, 13, 15, 14, 11] and sorted(got) == list(range(10, 16))


@st.composite
def _paths(draw):
    bs, W = draw(st.integers(1, 5)), draw(st.integers(2, 20))
    P = draw(st.integers(1, W))
    accepted, lens = [], []
    for _ in range(bs):
        a = draw(st.integers(0, P - 1))
        nodes = sorted(draw(st.lists(st.integers(1, W - 1), min_size=a, max_size=a, unique=True))) if a <= W - 1 else []
        a = len(nodes)
        accepted.append([0] + nodes + [-1] * (P - 1 - a))
        lens.append(a)
    new = [[1000 + 10 * b + t for t in range(a + 1)] + [-1] * (P - 1 - a) for b, a in enumerate(lens)]
    window = [[100 * (b + 1) + i for i in range(W)] for b in range(bs)]
    return accepted, lens, new, window


@settings(max_examples=200, deadline=None)
@given(_paths())
def test_plan_matches_the_reference_on_random_paths(case):
    accepted, lens, new, window = case
    plan = build_commit_plan(_acc(accepted, lens, new), torch.tensor(window))
    ref = build_commit_plan_reference(accepted, lens, new, window)
    assert plan.new_window.tolist() == ref["new_window"]
    assert plan.path_index.tolist() == ref["path_index"]
    assert plan.commit_lens.tolist() == ref["commit_lens"]
    assert plan.bonus.tolist() == ref["bonus"]
    assert plan.out_tokens.tolist() == ref["out_tokens"]
    P = len(accepted[0])
    assert plan.path_slots.tolist() == [row[:P] for row in ref["new_window"]]


def test_step_program_end_to_end():
    """draft_to_verify pads the tree to the verify width; verify_to_commit walks it and plans the
    commit: the committed window holds the path's slots first, and the path follows the target."""
    g = torch.Generator().manual_seed(3)
    bs, L, K, budget, width = 3, 5, 3, 7, 10
    lp = torch.sort(torch.log_softmax(torch.randn(bs, L, 30, generator=g), -1), -1, descending=True).values[..., :K]
    ids = torch.stack([torch.randperm(30, generator=g)[:K] for _ in range(bs * L)]).view(bs, L, K)
    root, prefix = torch.tensor([1, 2, 3]), torch.tensor([5, 0, 9])
    tree, layout = draft_to_verify(lp, ids, root, prefix, budget, width, max_depth=4)
    assert tree.depth.shape == (bs, width - 1) and layout.tokens.shape == (bs, width)
    assert int(tree.depth.max()) <= 4 and int((tree.depth > 0).sum(1).max()) == budget
    # The target agrees with each request's first child at every node: the walk follows rank 0.
    target = torch.gather(layout.tokens, 1, layout.first_child.clamp(min=0))
    window = torch.arange(bs * width).view(bs, width) + 500
    acc, plan = verify_to_commit(layout, target, L, window)
    ref = tree_walk(layout.tokens, layout.parent, layout.depth, target, L)
    assert torch.equal(acc.accepted, ref.accepted) and int(acc.accept_len.min()) >= 1
    for b in range(bs):
        path = [p for p in acc.accepted[b].tolist() if p >= 0]
        assert plan.new_window[b, : len(path)].tolist() == [int(window[b, p]) for p in path]


# ----------------------------------------------------------------------------- page size > 1


def test_move_plan_hard_coded_non_contiguous_paths_and_mid_batch_finishes():
    window = torch.tensor([[100, 101, 102, 103, 104, 105],
                           [200, 201, 202, 203, 204, 205],
                           [300, 301, 302, 303, 304, 305]])
    acc = _acc(accepted=[[0, 4, 5, -1], [0, -1, -1, -1], [0, 3, -1, -1]], accept_len=[2, 0, 1],
               new_tokens=[[11, 12, 13, -1], [21, -1, -1, -1], [31, 32, -1, -1]])
    plan = build_commit_plan(acc, window, move_kv=True)
    assert torch.equal(plan.new_window, window)  # pages keep their slots in position order
    assert plan.move_dst.tolist() == [[100, 101, 102, 103], [200, 201, 202, 203], [300, 301, 302, 303]]
    assert plan.move_src.tolist() == [[100, 104, 105, 103], [200, 201, 202, 203], [300, 303, 302, 303]]
    assert plan.path_slots.tolist() == plan.move_dst.tolist()
    assert plan.path_index.tolist() == [[0, 4, 5, 0], [0, 0, 0, 0], [0, 3, 0, 0]]
    assert plan.commit_lens.tolist() == [3, 1, 2] and plan.bonus.tolist() == [13, 21, 32]
    assert build_commit_plan(acc, window).move_src is None  # page size 1: the permutation


@settings(max_examples=200, deadline=None)
@given(_paths())
def test_move_plan_matches_the_reference_and_commits_the_path(case):
    """Applied to a KV store (one value per slot: the verify position it holds), moving through
    scratch slots puts the path's values at positions 0..a, as the permutation commits them at
    page size 1."""
    accepted, lens, new, window = case
    plan = build_commit_plan(_acc(accepted, lens, new), torch.tensor(window), move_kv=True)
    ref = build_commit_plan_reference(accepted, lens, new, window, move_kv=True)
    for key in ("new_window", "move_src", "move_dst", "path_index", "commit_lens", "bonus", "out_tokens"):
        assert getattr(plan, key).tolist() == ref[key], key
    W = len(window[0])
    kv = {slot: ("node", b, i) for b, row in enumerate(window) for i, slot in enumerate(row)}
    src, dst = plan.move_src.reshape(-1).tolist(), plan.move_dst.reshape(-1).tolist()
    scratch = [10**6 + j for j in range(len(src))]
    for s, t in zip(src, scratch):  # step 1: sources out of the window ...
        kv[t] = kv[s]
    for s, t in zip(scratch, dst):  # ... step 2: into place
        kv[t] = kv[s]
    permuted = build_commit_plan(_acc(accepted, lens, new), torch.tensor(window)).new_window.tolist()
    for b, a in enumerate(lens):
        for t in range(a + 1):
            assert kv[window[b][t]] == ("node", b, accepted[b][t])  # position t holds path node t
            assert ("node", b, accepted[b][t]) == ("node", b, window[b].index(permuted[b][t]))


def test_a_direct_overlapping_move_would_corrupt_the_path():
    """Path 0 -> 2 -> 3: slot 2 is a source (for position 1) and a destination (of node 3). A move
    that writes one entry before reading the next takes node 3's KV to position 1; the plan's
    caller therefore moves through scratch slots (verify_info.DDTreeVerifyInput.commit)."""
    window = torch.arange(6).view(1, 6)
    plan = build_commit_plan(_acc([[0, 2, 3]], [2], [[7, 8, 9]]), window, move_kv=True)
    kv = list(range(6))
    for s, t in zip(plan.move_src[0].tolist()[::-1], plan.move_dst[0].tolist()[::-1]):  # one by one
        kv[t] = kv[s]
    assert kv[:3] != [0, 2, 3]
