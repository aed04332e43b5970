"""verify_info.apply_grammar over a verify tree with sglang's real grammar objects (tiny Llama
tokenizer, no engine): an xgrammar grammar gets every node's mask from sglang's tree walk, equal
to masks computed node by node from a fresh grammar fed that node's path; sglang's
OutlinesGrammar (no rollback in sglang 0.5.17; over a stand-in guide) gets its root's mask
alone, equal to plain decoding's, and its request is flagged so the acceptance walk takes none
of its draft nodes."""

from __future__ import annotations

import types

import pytest
import torch

from sglang_ddtree.core.accept import tree_walk
from sglang_ddtree.core.verify_layout import VerifyLayout
from sglang_ddtree.testing import tiny_models
from sglang_ddtree.verify_info import apply_grammar, root_only_layout, tree_walkable

REGEX = "(abcd)+"
W = 5


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_models.model_path("llama")))


@pytest.fixture
def cpu_xgrammar(monkeypatch):
    """compat/cpu.py's two xgrammar shims, as the plugin installs them in a CPU engine."""
    import functools

    from sglang.srt.constrained import xgrammar_backend as xg

    from sglang_ddtree.compat import cpu

    monkeypatch.setattr(xg, "_allocate_token_bitmask", functools.partial(cpu._unpinned_bitmask, xg._allocate_token_bitmask))
    original = xg.XGrammarGrammar.apply_vocab_mask

    def apply(self, logits, vocab_mask):
        return cpu._apply_bitmask_on_cpu(original, self, logits, vocab_mask)

    monkeypatch.setattr(xg.XGrammarGrammar, "apply_vocab_mask", apply)


class _Guide:
    """A three-state FSM in the shape of outlines' RegexGuide ('ab' 'c' 'd' repeated): what
    sglang's OutlinesGrammar reads (outlines' own guide needs the ``datasets`` package to hash
    its tokenizer, which this environment does not install)."""

    def __init__(self, tok):
        self.allowed = [_ids(tok, "ab"), _ids(tok, "c"), _ids(tok, "d")]

    def get_next_state(self, state, token):
        assert token == self.allowed[state], (state, token)
        return (state + 1) % 3

    def get_next_instruction(self, state):
        return types.SimpleNamespace(tokens=[self.allowed[state]])


def _fresh(name, tok):
    """A new grammar of the test's language from ``name``'s backend (sglang's grammar classes)."""
    if name == "xgrammar":
        from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

        return XGrammarGrammarBackend(tok, vocab_size=len(tok)).dispatch_regex(REGEX)
    from sglang.srt.constrained.outlines_backend import OutlinesGrammar

    return OutlinesGrammar(_Guide(tok), None)


def _ids(tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def _tree(tok):
    """Root (the committed token) with children 'ab' and 'x' (forbidden); 'ab' -> 'c' -> 'd'.
    first child / next sibling ``[1, W]`` int64, tokens ``[1, W]``."""
    ab, x, c, d = (_ids(tok, t) for t in ("ab", "x", "c", "d"))
    tokens = torch.tensor([[0, ab, x, c, d]])
    first_child = torch.tensor([[1, 3, -1, 4, -1]])
    next_sibling = torch.tensor([[-1, 2, -1, -1, -1]])
    return first_child, next_sibling, tokens


def _batch(grammars, vocab):
    return types.SimpleNamespace(reqs=[types.SimpleNamespace(grammar=g) for g in grammars],
                                 sampling_info=types.SimpleNamespace(vocab_size=vocab, grammar_mask="leftover"))


def _masked(g, vocab, path):
    """Logits [vocab] of zeros masked by the fresh grammar ``g`` advanced along ``path``."""
    for t in path:
        g.accept_token(t)
    m = g.allocate_vocab_mask(vocab_size=vocab, batch_size=1, device="cpu")
    g.fill_vocab_mask(m, 0)
    row = torch.zeros(1, vocab)
    g.apply_vocab_mask(logits=row, vocab_mask=m)
    return row[0]


@pytest.mark.parametrize("name", ["xgrammar", "outlines"])
def test_grammar_masks_over_a_tree(tokenizer, name, cpu_xgrammar):
    from sglang.srt.speculative.spec_utils import GrammarTree

    vocab = len(tokenizer)
    grammar = _fresh(name, tokenizer)
    first_child, next_sibling, tokens = _tree(tokenizer)
    # Two requests: the second has the grammar, the first none (its rows stay unmasked).
    fc = torch.cat([first_child, first_child]); ns = torch.cat([next_sibling, next_sibling])
    tk = torch.cat([tokens, tokens])
    logits = torch.zeros(2 * W, vocab)
    batch = _batch([None, grammar], vocab)
    root_only = apply_grammar(batch, GrammarTree.from_host(fc, ns, tk), logits, barrier=None)
    assert batch.sampling_info.grammar_mask is None  # the extend's leftover mask is cleared
    assert torch.isfinite(logits[:W]).all()  # no grammar: untouched
    rows = logits[W:]
    assert torch.equal(rows[0], _masked(_fresh(name, tokenizer), vocab, []))  # the root: the committed state
    assert rows[0, tokens[0, 2]] == float("-inf")  # 'x' is forbidden after the root
    if name == "xgrammar":
        assert tree_walkable(grammar)
        assert root_only is None
        ab, c = tokens[0, 1].item(), tokens[0, 3].item()
        assert torch.equal(rows[1], _masked(_fresh(name, tokenizer), vocab, [ab]))
        assert torch.equal(rows[3], _masked(_fresh(name, tokenizer), vocab, [ab, c]))
        # after 'abc' a 'd' must come: 'd' allowed, 'ab' (allowed at the root) forbidden
        assert rows[3, tokens[0, 4]] == 0 and rows[3, ab] == float("-inf") and rows[0, ab] == 0
    else:
        assert not tree_walkable(grammar)
        assert root_only.tolist() == [False, True]
        assert torch.isfinite(rows[1:]).all()  # no node below the root was walked
    # The grammar itself is back in its committed state (the walk rolled back / never advanced it).
    own = grammar.allocate_vocab_mask(vocab_size=vocab, batch_size=1, device="cpu")
    grammar.fill_vocab_mask(own, 0)
    row = torch.zeros(1, vocab)
    grammar.apply_vocab_mask(logits=row, vocab_mask=own)
    assert torch.equal(row[0], rows[0])


def test_root_only_requests_accept_no_draft_node():
    """The target agrees with every draft token of both requests; the flagged request commits
    its root's token alone, the other its whole path."""
    tokens = torch.tensor([[9, 4, 5, 6], [9, 4, 5, 6]])
    parent = torch.tensor([[-1, 0, 1, 2]] * 2)
    depth = torch.tensor([[0, 1, 2, 3]] * 2)
    first_child = torch.tensor([[1, 2, 3, -1]] * 2)
    next_sibling = torch.full((2, 4), -1)
    layout = VerifyLayout(tokens=tokens, depth=depth, positions=depth, parent=parent,
                          ancestor_mask=torch.ones(2, 4, 4, dtype=torch.bool), first_child=first_child,
                          next_sibling=next_sibling, retrieve_index=torch.arange(8).view(2, 4))
    target = torch.tensor([[4, 5, 6, 7], [4, 5, 6, 7]])
    walk = root_only_layout(layout, torch.tensor([False, True]))
    acc = tree_walk(walk.tokens, walk.parent, walk.depth, target, 3)
    assert acc.accept_len.tolist() == [3, 0]
    assert acc.new_tokens[1, 0].item() == 4  # the root's target token, as plain decoding commits
    assert torch.equal(walk.tokens[0], tokens[0]) and walk.tokens[1].tolist() == [9, -1, -1, -1]
    assert torch.equal(layout.tokens, tokens)  # the verify's layout itself is untouched
