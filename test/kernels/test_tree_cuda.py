"""kernels/tree_cuda.py on a GPU: the CUDA tree builder + layout and walk equal the CPU reference
and the torch implementations, padded layouts included."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core.tree_builder import build_tree, build_tree_reference

pytestmark = pytest.mark.gpu


def _inputs(bs, L, V, seed, dev="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    # Quantised logits: many exact ties, on device.
    logits = (torch.randn(bs, L, V, generator=g) * 4).round() / 4
    return logits.to(dev)


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
