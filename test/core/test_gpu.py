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
