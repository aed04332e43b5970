"""engine/draft_head.py: the drafter's top-K head over the target's lm_head, eager and as the
drafter graph's capture hook, on one rank and over R simulated tensor-parallel ranks (threads
meeting in an all-gather), against the plain full-vocabulary reference (core/topk.py)."""

from __future__ import annotations

import threading
import types

import pytest
import torch

from sglang_ddtree.core.topk import depth_topk_reference
from sglang_ddtree.engine.draft_head import DraftTopKHead

H, V, BLOCK, K = 16, 50, 5, 4


def _case(bs: int, seed: int, pad: int = 3):
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(V + pad, H, generator=g)  # the last `pad` rows: vocabulary padding
    hidden = torch.randn(bs * BLOCK, H, generator=g)
    # Ties across rank boundaries: two draft positions with equal top logits.
    weight[7] = weight[V - 2]
    logits = (hidden.view(bs, BLOCK, H)[:, 1:, :] @ weight[:V].t())
    return weight, hidden, depth_topk_reference(logits.double(), K)


def _check(lp, ids, want):
    want_lp, want_ids = want
    assert lp.dtype == torch.float32 and ids.dtype == torch.int64
    assert not torch.isnan(lp).any()
    assert torch.equal(ids, want_ids)
    torch.testing.assert_close(lp, want_lp, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bs", [1, 3])
def test_eager_and_graph_hook_match_the_reference_on_one_rank(bs):
    weight, hidden, want = _case(bs, seed=bs)
    head = DraftTopKHead(weight, V, 0, BLOCK, K)
    _check(*head.topk(hidden), want)
    _check(*head.topk(hidden.view(bs, BLOCK, H)), want)
    head.allocate(max_bs=4)
    head(hidden)  # what the captured graph runs
    _check(*head.graph_result(bs), want)


def test_graph_hook_refuses_a_batch_beyond_its_buffers():
    weight, hidden, _ = _case(3, seed=0)
    head = DraftTopKHead(weight, V, 0, BLOCK, K)
    with pytest.raises(RuntimeError, match="exceeds"):
        head(hidden)  # never allocated
    head.allocate(max_bs=2)
    with pytest.raises(RuntimeError, match="exceeds"):
        head(hidden)


class _ThreadGroup:
    """R ranks as threads: ``all_gather_into_tensor`` lays every rank's input out rank-major."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self._inputs = [None] * world_size
        self._barrier = threading.Barrier(world_size)
        self.rank = threading.local()

    def all_gather_into_tensor(self, output, input):
        r = self.rank.value
        self._inputs[r] = input.clone()
        self._barrier.wait()
        output.copy_(torch.cat(self._inputs))
        self._barrier.wait()


@pytest.mark.parametrize("ranks", [2, 4])
def test_tensor_parallel_ranks_agree_with_the_full_vocabulary_reference(ranks):
    bs = 2
    weight, hidden, want = _case(bs, seed=10 + ranks, pad=0)
    group = _ThreadGroup(ranks)
    shard = -(-V // ranks)  # sglang pads the last shard; its real rows end at V
    results, errors = [None] * ranks, []

    def rank_main(r):
        try:
            group.rank.value = r
            start, end = r * shard, min(V, (r + 1) * shard)
            padded = torch.zeros(shard, H)
            padded[: end - start] = weight[start:end]
            lm_head = types.SimpleNamespace(weight=padded, shard_indices=types.SimpleNamespace(
                org_vocab_start_index=start, org_vocab_end_index=end, num_added_elements=0))
            head = DraftTopKHead.from_lm_head(lm_head, BLOCK, K, tp_group=group)
            eager = head.topk(hidden)
            head.allocate(max_bs=bs)
            head(hidden)
            results[r] = (eager, head.graph_result(bs))
        except BaseException as e:  # noqa: BLE001 - reported below, the barrier is aborted
            errors.append(e)
            group._barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    for eager, graph in results:
        _check(*eager, want)
        _check(*graph, want)


def test_added_vocabulary_is_refused():
    lm_head = types.SimpleNamespace(weight=torch.zeros(4, H), shard_indices=types.SimpleNamespace(
        org_vocab_start_index=0, org_vocab_end_index=4, num_added_elements=2))
    with pytest.raises(NotImplementedError, match="added vocabulary"):
        DraftTopKHead.from_lm_head(lm_head, BLOCK, K)


def test_the_logits_product_is_the_one_given_over_the_whole_block():
    """``linear`` computes the block's logits, the bonus position's included (one contiguous
    product, ``[bs * block, H]``), and the head drops position 0's top-K after it."""
    bs = 2
    weight, hidden, want = _case(bs, seed=7)
    seen = []

    def linear(x, w):
        seen.append((tuple(x.shape), tuple(w.shape), x.is_contiguous()))
        return torch.nn.functional.linear(x, w)

    head = DraftTopKHead(weight, V, 0, BLOCK, K, linear=linear)
    _check(*head.topk(hidden), want)
    assert seen == [((bs * BLOCK, H), (V, H), True)]
