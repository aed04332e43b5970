"""core/oracle_check.py: the replay chain's layout and the mismatch test."""

from __future__ import annotations

import torch

from sglang_ddtree.core.oracle_check import replay_chain, replay_mismatch
from sglang_ddtree.core.verify_layout import build_verify_layout


def test_replay_chain_lays_out_the_accepted_tokens_causally():
    new_tokens = torch.tensor([[11, 12, 13, 99], [21, 98, 0, 0], [31, 32, 33, 34]])
    accept_len = torch.tensor([2, 0, 3])
    root = torch.tensor([5, 6, 7])
    prefix = torch.tensor([10, 3, 0])
    width = 6
    lay = build_verify_layout(replay_chain(new_tokens, accept_len, width - 1), root, prefix, width - 1)
    for b in range(3):
        a = int(accept_len[b])
        assert lay.tokens[b, 0] == root[b]
        assert lay.tokens[b, 1:a + 1].tolist() == new_tokens[b, :a].tolist()
        assert lay.positions[b, : a + 1].tolist() == list(range(int(prefix[b]), int(prefix[b]) + a + 1))
        # Causal over the chain: position t sees exactly positions 0..t.
        m = lay.ancestor_mask[b, : a + 1, : a + 1]
        assert torch.equal(m, torch.tril(torch.ones(a + 1, a + 1, dtype=torch.bool)))
        # Padding sees only itself and is seen by nobody else.
        pad = lay.ancestor_mask[b, a + 1:]
        assert torch.equal(pad[:, : a + 1], torch.zeros_like(pad[:, : a + 1]))


def test_replay_mismatch_checks_accepted_tokens_and_the_bonus_only():
    new_tokens = torch.tensor([[11, 12, 99, 0], [21, 98, 0, 0]])
    accept_len = torch.tensor([2, 0])
    good = torch.tensor([[11, 12, 99, 5, 5], [21, 7, 7, 7, 7]])  # beyond accept_len: not compared
    assert replay_mismatch(good, new_tokens, accept_len).tolist() == [False, False]
    wrong_draft = good.clone()
    wrong_draft[0, 1] = 13
    wrong_bonus = good.clone()
    wrong_bonus[1, 0] = 22
    assert replay_mismatch(wrong_draft, new_tokens, accept_len).tolist() == [True, False]
    assert replay_mismatch(wrong_bonus, new_tokens, accept_len).tolist() == [False, True]
