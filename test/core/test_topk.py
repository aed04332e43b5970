"""Per-depth top-K: exact against a sorted reference; TP merge equal to single rank."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from sglang_ddtree.core.topk import depth_topk, depth_topk_reference, local_topk, merge_rank_topk


def _logits(seed, bs, L, V, n_distinct):
    g = torch.Generator().manual_seed(seed)
    # Few distinct values make ties common, including at the K-th boundary.
    vals = torch.randn(n_distinct, generator=g) * 3
    idx = torch.randint(0, n_distinct, (bs, L, V), generator=g)
    return vals[idx]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bs=st.integers(1, 3), L=st.integers(1, 5),
       V=st.integers(1, 40), K=st.integers(1, 12), n_distinct=st.integers(1, 8))
def test_depth_topk_matches_reference_with_ties(seed, bs, L, V, K, n_distinct):
    x = _logits(seed, bs, L, V, n_distinct)
    lp, ids = depth_topk(x, K)
    lp_ref, ids_ref = depth_topk_reference(x, K)
    assert torch.equal(ids, ids_ref)
    assert not lp.isnan().any()
    torch.testing.assert_close(lp, lp_ref, rtol=0, atol=2e-6)
    assert (lp[..., 1:] <= lp[..., :-1]).all()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), V=st.integers(4, 64), R=st.integers(1, 5),
       K=st.integers(1, 10), n_distinct=st.integers(1, 6), data=st.data())
def test_tensor_parallel_merge_equals_single_rank(seed, V, R, K, n_distinct, data):
    x = _logits(seed, 2, 3, V, n_distinct)
    # Uneven shard boundaries, as with a padded vocabulary split.
    cuts = sorted(data.draw(st.lists(st.integers(1, V - 1), min_size=R - 1, max_size=R - 1, unique=True))) if R > 1 and V > R else []
    bounds = [0] + cuts + [V]
    keys, lses = [], []
    k_r = K
    for a, b in zip(bounds, bounds[1:]):
        kk, lse = local_topk(x[..., a:b], k_r, vocab_start=a)
        if kk.shape[-1] < k_r:  # a shard smaller than K pads with the lowest possible key
            pad = torch.full(kk.shape[:-1] + (k_r - kk.shape[-1],), torch.iinfo(torch.int64).min)
            kk = torch.cat([kk, pad], -1)
        keys.append(kk)
        lses.append(lse)
    # What each rank sends: K int64 keys + one fp32 per position, never the logits.
    # Padding keys are never selected as long as k <= the vocabulary size.
    lp_tp, ids_tp = merge_rank_topk(torch.stack(keys), torch.stack(lses), min(K, V))
    lp_1, ids_1 = depth_topk(x, K)
    assert torch.equal(ids_tp, ids_1)
    torch.testing.assert_close(lp_tp, lp_1, rtol=0, atol=2e-6)


def test_negative_zero_ties_with_positive_zero():
    x = torch.tensor([[[-0.0, 0.0, -1.0]]])
    _, ids = depth_topk(x, 2)
    assert ids.tolist() == [[[0, 1]]]
