"""GPU checks of the core: same trees as the CPU reference, no host sync, graph-capturable."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core.step import draft_to_verify, verify_to_commit
from sglang_ddtree.core.tree_builder import build_tree, build_tree_reference

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
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = step()
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


@pytest.mark.parametrize("bs,L,K,B,caps", [
    (1, 15, 8, 64, (None, None)), (8, 15, 4, 256, (2, None)), (3, 31, 16, 1024, (None, 9)),
    (256, 7, 4, 32, (None, None)), (2, 3, 1, 50, (None, None)),
])
def test_cuda_tree_kernels_equal_reference_and_torch(bs, L, K, B, caps):
    from sglang_ddtree.core.accept import tree_walk
    from sglang_ddtree.core.topk import depth_topk
    from sglang_ddtree.core.verify_layout import build_verify_layout

    tc = _cuda_kernels()
    for seed in range(3):
        lp, ids = depth_topk(_inputs(bs, L, 512, seed), K)
        roots = torch.randint(0, 512, (bs,), device="cuda")
        prefix = torch.randint(0, 900, (bs,), device="cuda")
        tree, lay = tc.build_tree_and_layout(lp, ids, roots, prefix, B, *caps)
        ref = build_tree_reference(lp.cpu(), ids.cpu(), B, *caps)
        for f in ("depth", "parent", "rank", "token", "score"):
            assert torch.equal(getattr(tree, f).cpu(), getattr(ref, f)), f
        torch_tree = build_tree(lp, ids, B, *caps)
        lay_t = build_verify_layout(torch_tree, roots, prefix, L)
        for f in ("tokens", "depth", "positions", "parent", "ancestor_mask", "first_child", "next_sibling"):
            assert torch.equal(getattr(lay, f), getattr(lay_t, f)), f
        # The worker pads the CUDA layout when the verify width exceeds budget + 1.
        from sglang_ddtree.core.tree_builder import pad_tree
        from sglang_ddtree.core.verify_layout import pad_layout

        wide = pad_layout(lay, B + 1 + 7)
        wide_t = build_verify_layout(pad_tree(torch_tree, B + 7), roots, prefix, L)
        for f in ("tokens", "depth", "positions", "parent", "ancestor_mask", "first_child", "next_sibling"):
            assert torch.equal(getattr(wide, f), getattr(wide_t, f)), f
        # Walk: targets that follow random children most of the time.
        g = torch.Generator(device="cpu").manual_seed(seed)
        target = torch.randint(0, 512, lay.tokens.shape, generator=g).cuda()
        follow = torch.rand(lay.tokens.shape, generator=g).cuda() < 0.8
        fc_tok = torch.gather(lay.tokens, 1, lay.first_child.clamp(min=0))
        target = torch.where(follow & (lay.first_child >= 0), fc_tok, target)
        a = tc.tree_walk(lay, target, L)
        b = tree_walk(lay_t.tokens, lay_t.parent, lay_t.depth, target, L)
        assert torch.equal(a.accepted, b.accepted)
        assert torch.equal(a.accept_len, b.accept_len)
        assert torch.equal(a.new_tokens, b.new_tokens)
