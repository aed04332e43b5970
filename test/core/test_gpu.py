"""The core on a GPU: the batched builder equals the CPU reference; the served step program has no
host synchronisation and replays in a CUDA graph (with the torch builder and with the CUDA kernels)."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core.step import draft_to_verify, verify_to_commit
from sglang_ddtree.core.tree_builder import build_tree, build_tree_reference
from sglang_ddtree.testing.cuda_graph import capture

pytestmark = pytest.mark.gpu


def _inputs(bs, L, V, seed, dev="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    # Quantised logits: many exact ties, on device.
    logits = (torch.randn(bs, L, V, generator=g) * 4).round() / 4
    return logits.to(dev)


@pytest.mark.parametrize("bs,L,K,B", [(1, 15, 8, 64), (8, 15, 4, 256), (3, 31, 16, 1024), (256, 7, 4, 32)])
def test_gpu_builder_equals_cpu_reference(bs, L, K, B):
    from sglang_ddtree.core.topk import depth_topk

    for seed in range(2):
        logits = _inputs(bs, L, 512, seed)
        lp, ids = depth_topk(logits, K)
        lp_cpu, ids_cpu = depth_topk(logits.cpu(), K)
        assert torch.equal(ids.cpu(), ids_cpu)
        torch.testing.assert_close(lp.cpu(), lp_cpu, rtol=0, atol=1e-5)
        # The builder is checked on identical inputs: CPU and GPU logsumexp may differ in the
        # last ulp, which shifts every lp of a row and can flip exact ties between trees.
        fast = build_tree(lp, ids, B)
        ref = build_tree_reference(lp.cpu(), ids.cpu(), B)
        for f in ("depth", "parent", "rank", "token", "score"):
            assert torch.equal(getattr(fast, f).cpu(), getattr(ref, f)), f


@pytest.mark.parametrize("with_cuda_kernels", [False, True])
def test_step_has_no_host_sync_and_replays_in_a_cuda_graph(with_cuda_kernels):
    """The served step program (top-K, tree + layout padded to the verify width, walk, commit
    plan), with the torch builder and with the CUDA kernels: no host synchronisation, capturable
    in a CUDA graph, the replay equal to the eager step."""
    from sglang_ddtree.core.topk import depth_topk

    fast = _cuda_kernels() if with_cuda_kernels else None
    bs, L, V, B, K = 4, 15, 4096, 64, 8
    width = B + 1 + 3  # padded past the tree
    logits = _inputs(bs, L, V, 0)
    roots = torch.randint(0, V, (bs,), device="cuda")
    prefix = torch.randint(10, 100, (bs,), device="cuda")
    window = torch.arange(bs * width, device="cuda").view(bs, width) + 1000

    def step():
        lp, ids = depth_topk(logits, K)
        tree, lay = draft_to_verify(lp, ids, roots, prefix, B, width, max_depth=L, fast=fast)
        # Target agrees with the first child everywhere: acceptance walks the greedy chain.
        target = torch.gather(lay.tokens, 1, lay.first_child.clamp(min=0))
        return verify_to_commit(lay, target, L, window, fast=fast)

    eager = step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()  # raises on any synchronising call
        g, out = capture(step)
        g.replay()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert torch.equal(out[0].accepted, eager[0].accepted)
    assert (eager[0].accept_len > 0).all()
    assert torch.equal(out[1].new_window, eager[1].new_window)
    assert torch.equal(out[1].path_slots, eager[1].path_slots)


def _cuda_kernels():
    from sglang_ddtree.kernels import tree_cuda

    why = tree_cuda.available()
    if why is not None:
        pytest.fail(f"CUDA tree kernels unavailable on a GPU machine: {why}")
    return tree_cuda


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_stats_kernel_equals_the_torch_forms(seed):
    """``tree_cuda.step_stats`` (one launch) against what the worker's torch path computes:
    ``DDTreeStats.record`` and ``record_shadow``, ``shadow_chain_accept`` and
    ``BudgetPolicy.record``, over steps of random trees that verified the chain, a small and a
    large budget (the policy's estimates compared after every step), a batch with nothing
    accepted, and the shadow alone (no policy)."""
    from sglang_ddtree.core.accept import tree_walk
    from sglang_ddtree.core.budget_policy import CHAIN, BudgetPolicy, StepCostTable
    from sglang_ddtree.core.shadow_chain import shadow_chain_accept
    from sglang_ddtree.metrics import DDTreeStats

    from random_trees import shadow_case

    fast = _cuda_kernels()
    table = StepCostTable.from_rows([dict(config=c, concurrency=1, ms_per_step=1.0)
                                     for c in ("DDTREE-chain", "DDTREE-4", "DDTREE-16", "DDTREE-64")])
    L, K, max_depth = 7, 4, 6
    pols = {d: BudgetPolicy(table, flush_every=2) for d in ("cpu", "cuda")}
    stats = {d: DDTreeStats(64, max_depth, d, shadow=True) for d in ("cpu", "cuda")}
    for step, (verified, bs, B) in enumerate([(64, 5, 64), (CHAIN, 3, 7), (16, 9, 16), (64, 1, 64), (4, 7, 4),
                                              (64, 6, 64)]):
        lp, ids, tree, lay, target, rank = shadow_case(seed * 100 + step, bs, L, K, B, vocab=6)
        acc = tree_walk(lay.tokens, lay.parent, lay.depth, target, L)
        if step == 5:  # nothing accepted: the root's target matches no child
            acc.accept_len.zero_()
            acc.accepted[:, 1:] = -1
        bonus = acc.new_tokens.gather(1, acc.accept_len.unsqueeze(1)).squeeze(1)
        want_shadow = verified != CHAIN
        # The torch forms, on the CPU.
        stats["cpu"].record(acc.accept_len, tree.depth)
        sh = shadow_chain_accept(acc.accepted, acc.accept_len, rank, ids[:, :, 0], bonus, L)
        stats["cpu"].record_shadow(*sh)
        pols["cpu"].record(verified, acc.accepted, acc.accept_len, chain_accept=sh[0] if want_shadow else None)
        # The kernel, on the GPU (the chain tokens a strided view, as the worker passes them).
        c = lambda t: t.cuda()  # noqa: E731
        ids_d = c(ids)
        sums = pols["cuda"].begin_record(verified, bs, ids_d.device, want_shadow)
        got = fast.step_stats(c(acc.accepted), c(acc.accept_len), c(tree.depth), stats["cuda"],
                              (c(tree.rank), ids_d[:, :, 0], c(bonus), L), sums)
        pols["cuda"].end_record(bs)
        assert torch.equal(got[0].cpu(), sh[0]) and torch.equal(got[1].cpu(), sh[1]), step
        pols["cpu"].flush()
        pols["cuda"].flush()
        assert pols["cuda"]._mean == pols["cpu"]._mean, step
        assert pols["cuda"]._counts == pols["cpu"]._counts
    for f in ("accept_hist", "depth_hist", "nodes", "shadow_hist", "shadow_censored"):
        assert torch.equal(getattr(stats["cuda"], f).cpu(), getattr(stats["cpu"], f)), f
    assert stats["cuda"].batch_steps == stats["cpu"].batch_steps == 6
    assert int(stats["cpu"].shadow_hist[1:].sum()) > 0 and int(stats["cpu"].shadow_censored) >= 0
    assert set(pols["cpu"]._mean) == {CHAIN, 4, 16, 64}
    # The shadow alone (no policy, no shadow counters): the same chain accept lengths.
    lp, ids, tree, lay, target, rank = shadow_case(seed + 7, 4, L, K, 32, vocab=6)
    acc = tree_walk(lay.tokens, lay.parent, lay.depth, target, L)
    bonus = acc.new_tokens.gather(1, acc.accept_len.unsqueeze(1)).squeeze(1)
    plain = DDTreeStats(64, max_depth, "cuda", shadow=False)
    got = fast.step_stats(acc.accepted.cuda(), acc.accept_len.cuda(), tree.depth.cuda(), plain,
                          (tree.rank.cuda(), ids.cuda()[:, :, 0], bonus.cuda(), L), None)
    want = shadow_chain_accept(acc.accepted, acc.accept_len, rank, ids[:, :, 0], bonus, L)
    assert torch.equal(got[0].cpu(), want[0]) and torch.equal(got[1].cpu(), want[1])
    assert int(plain.shadow_hist.sum()) == 0 and int(plain.accept_hist.sum()) == 4
