"""kernels/draft_topk.py, the drafter head's fused top-K + logsumexp, against its plain-torch
reference (core.topk.local_topk) and the full-vocabulary Python sort (depth_topk_reference):
the same int64 keys (ids and order exact, ties to the lower id, inside a chunk and across
chunks), lse within 1e-6 relative, no NaN. Compiled on a GPU (plus the drafter's real shape and
a CUDA-graph replay), in the Triton interpreter on CPU (small vocabularies)."""

from __future__ import annotations

import pytest
import torch
from gdn_cases import DEV, HAS_CUDA, IN_CHILD, interpreter_test, kernels_here

from sglang_ddtree.core.topk import _decode, depth_topk_reference, local_topk
from sglang_ddtree.kernels import draft_topk

test_in_triton_interpreter = interpreter_test(__file__)


def _logits(n, v, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, v, generator=g) * 3).to(dtype)
    c = draft_topk.CHUNK
    if v > 2 * c:
        x[0, 10:20] = x[0].max() + 1  # ten-way tie at the top, inside one chunk
        x[1, c - 3: c + 3] = x[1].max() + 1  # a tie across a chunk boundary
    if n > 2:
        x[2, : v // 2] = float("-inf")  # half a row masked out
    return x.to(DEV)


def _check(x, k, start=0):
    keys, lse = draft_topk.local_topk_fused(x, k, start)
    want_keys, want_lse = local_topk(x, k, start)
    assert keys.dtype == torch.int64 and lse.dtype == torch.float32
    assert not torch.isnan(lse).any()
    assert torch.equal(keys, want_keys)
    torch.testing.assert_close(lse, want_lse, rtol=1e-6, atol=1e-5)
    return keys, lse


@kernels_here
@pytest.mark.parametrize("n,v,k,dtype", [
    (3, 2 * draft_topk.CHUNK + 77, 8, torch.bfloat16),  # a short last chunk
    (4, draft_topk.CHUNK, 13, torch.float16),           # one full chunk, k not a power of two
    (3, 3 * draft_topk.CHUNK, 1, torch.float32),
    (2, 40, 40, torch.float32),                          # k == V
    (1, 300, 64, torch.bfloat16),                        # the largest k
])
def test_fused_topk_equals_the_reference(n, v, k, dtype):
    x = _logits(n, v, dtype, seed=n * 1000 + k)
    _check(x, k, start=0)
    _check(x, k, start=123_457)  # a rank's shard: global ids


@kernels_here
def test_fused_topk_log_probs_equal_the_full_vocabulary_sort():
    x = _logits(3, 2 * draft_topk.CHUNK + 5, torch.bfloat16, seed=7)
    keys, lse = _check(x, 8)
    lp, ids = _decode(keys, lse)
    want_lp, want_ids = depth_topk_reference(x.double().cpu(), 8)
    assert torch.equal(ids.cpu(), want_ids)
    torch.testing.assert_close(lp.double().cpu(), want_lp.double(), rtol=0, atol=1e-5)


@kernels_here
def test_unsupported_inputs_are_refused():
    x = _logits(2, 64, torch.float32, seed=1)
    assert not draft_topk.supported(x, 65) and not draft_topk.supported(x, 0)
    assert not draft_topk.supported(x.t(), 4)  # the vocabulary dim must be unit-stride
    with pytest.raises(ValueError, match="unsupported"):
        draft_topk.local_topk_fused(x, 65)
    with pytest.raises(ValueError, match="2\\*\\*30"):
        draft_topk.local_topk_fused(x, 4, vocab_start=(1 << 30) - 10)


@pytest.mark.skipif(HAS_CUDA or IN_CHILD, reason="CPU without the interpreter only")
def test_not_supported_on_cpu_without_the_interpreter():
    assert not draft_topk.supported(torch.zeros(2, 64), 4)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_drafter_shape_and_cuda_graph_replay():
    """Qwen3.6's vocabulary (248320) at 16 requests x 15 depths, bf16, top-8; then the same
    inputs through a captured graph."""
    x = (torch.randn(16 * 15, 248_320, device="cuda") * 4).to(torch.bfloat16)
    keys, lse = _check(x, 8)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        draft_topk.local_topk_fused(x, 8)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        out = draft_topk.local_topk_fused(x, 8)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out[0], keys) and torch.equal(out[1], lse)
