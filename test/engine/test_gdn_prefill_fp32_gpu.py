"""The float32 route's GatedDeltaNet prefill (testing/gdn_prefill_fp32.py) against sglang's own
chunked prefill kernel on the GPU, driven as ``TritonGDNKernel.extend`` drives it: the same bf16
inputs (ours in float32), a state pool with per-sequence slots, varlen offsets. Pins down the
contract the CPU test cannot: the pool's transposed layout, the scale, the key normalisation and
the in-place final-state write, as sglang's kernel reads and writes them. Tolerance: 2e-2 relative
to each tensor's largest entry (sglang's kernel computes in bf16; a wrong layout or scale is O(1))."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", [dict(H=2, HV=4, K=128, V=128), dict(H=16, HV=48, K=128, V=128)])
def test_matches_sglangs_chunked_prefill(shape):
    from sglang.kernels.ops.attention.fla.chunk import chunk_gated_delta_rule

    from sglang_ddtree.testing.gdn_prefill_fp32 import chunk_gdn_prefill

    H, HV, K, V = shape["H"], shape["HV"], shape["K"], shape["V"]
    lens = [37, 1, 200, 64]
    T, dev = sum(lens), "cuda"
    gen = torch.Generator(device=dev).manual_seed(3)
    q, k = (torch.randn(1, T, H, K, device=dev, generator=gen).bfloat16() for _ in range(2))
    v = torch.randn(1, T, HV, V, device=dev, generator=gen).bfloat16()
    g = -torch.nn.functional.softplus(torch.randn(1, T, HV, device=dev, generator=gen)) * 0.3
    beta = torch.rand(1, T, HV, device=dev, generator=gen).bfloat16()
    pool = torch.randn(len(lens) + 2, HV, V, K, device=dev, generator=gen) * 0.1
    slots = torch.tensor([5, 0, 3, 1], device=dev, dtype=torch.int32)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], device=dev, dtype=torch.int32)
    theirs_pool, ours_pool = pool.clone(), pool.clone()
    o_ref = chunk_gated_delta_rule(q=q, k=k, v=v, g=g, beta=beta, initial_state=theirs_pool,
                                   initial_state_indices=slots, cu_seqlens=cu, head_first=False,
                                   use_qk_l2norm_in_kernel=True)[0]
    o = chunk_gdn_prefill(q.float(), k.float(), v.float(), g, beta.float(), ours_pool, slots, cu)
    torch.cuda.synchronize()
    assert o.dtype == torch.float32 and not o.isnan().any() and not ours_pool.isnan().any()
    ref = o_ref.float()
    assert (o - ref).abs().max() <= 2e-2 * ref.abs().max(), (o - ref).abs().max()
    for s in slots.tolist():
        d = (ours_pool[s] - theirs_pool[s]).abs().max()
        assert d <= 2e-2 * theirs_pool[s].abs().max(), (s, d)
    untouched = [2, 4]
    assert torch.equal(ours_pool[untouched], pool[untouched])
