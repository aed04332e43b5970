"""core/verify_layout.py: the layout of random trees vs a loop reference, padded layouts."""

from __future__ import annotations

import pytest

import torch
from hypothesis import given, settings, strategies as st

from random_trees import random_trees
from sglang_ddtree.core.tree_builder import pad_tree
from sglang_ddtree.core.verify_layout import build_verify_layout, build_verify_layout_reference, pad_layout


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 3), L=st.integers(1, 6), K=st.integers(1, 4), B=st.integers(1, 40))
def test_layout_matches_reference(seed, bs, L, K, B):
    tree = random_trees(seed, bs, L, K, B)
    roots = torch.arange(bs) + 7
    prefix = torch.randint(0, 100, (bs,), generator=torch.Generator().manual_seed(seed))
    fast = build_verify_layout(tree, roots, prefix, max_depth=L)
    ref = build_verify_layout_reference(tree, roots, prefix)
    for f in ("tokens", "depth", "positions", "parent", "ancestor_mask", "first_child", "next_sibling", "retrieve_index"):
        assert torch.equal(getattr(fast, f), getattr(ref, f)), f
    n = B + 1
    # Packed mask decodes to the bool mask.
    packed = fast.packed_mask().long() & 0xFFFFFFFF
    bits = (packed.unsqueeze(-1) >> torch.arange(32)) & 1
    assert torch.equal(bits.reshape(bs, n, -1)[..., :n].bool(), fast.ancestor_mask)
    # FULL_MASK layout: per request [n, prefix + n] with the prefix visible.
    full = fast.full_mask(prefix, int(prefix.sum()))
    off = 0
    for b in range(bs):
        w = int(prefix[b]) + n
        blk = full[off : off + n * w].view(n, w)
        assert blk[:, : int(prefix[b])].all()
        assert torch.equal(blk[:, int(prefix[b]) :], fast.ancestor_mask[b])
        off += n * w
    assert off == full.numel()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 3), L=st.integers(1, 6), K=st.integers(1, 4),
       B=st.integers(1, 20), extra=st.integers(0, 12))
def test_padded_layout_equals_the_layout_of_the_padded_tree(seed, bs, L, K, B, extra):
    """What the worker does after the CUDA builder (exactly budget + 1 positions) when the verify
    width is padded up to the draft block: the same layout the torch path builds from the padded
    tree, field by field."""
    tree = random_trees(seed, bs, L, K, B)
    roots = torch.arange(bs) + 3
    prefix = torch.randint(0, 100, (bs,), generator=torch.Generator().manual_seed(seed))
    n = B + 1 + extra
    padded = pad_layout(build_verify_layout(tree, roots, prefix, max_depth=L), n)
    ref = build_verify_layout(pad_tree(tree, n - 1), roots, prefix, max_depth=L)
    for f in ("tokens", "depth", "positions", "parent", "ancestor_mask", "first_child", "next_sibling", "retrieve_index"):
        assert torch.equal(getattr(padded, f), getattr(ref, f)), f
    assert padded.tokens.shape == (bs, n)


def test_pad_layout_refuses_to_shrink():
    lay = build_verify_layout(random_trees(1, 1, 2, 2, 4), torch.tensor([1]), torch.tensor([5]), max_depth=2)
    with pytest.raises(ValueError, match="cannot pad"):
        pad_layout(lay, 3)
