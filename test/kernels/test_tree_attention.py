"""kernels/tree_attention: the split-context tree-verify attention against its float64 reference
(naive.tree_attention_reference) on fresh random trees, contexts and pools: ragged windows,
empty contexts, GQA groups, one split (single kernel) and many (split + merge, more splits than
context blocks), slots scattered in the pool. Tolerances (max abs error over max abs reference):
fp32 inputs 2e-5, bf16 / fp16 1e-2 (bf16 output rounding and fp32 accumulation). The output is
poisoned with NaN first: every row must be written, and NaN never passes. bf16 only on a GPU (the
interpreter's bf16 dots are wrong). The causal mask in
place of the tree mask must fail the check (the check sees the tree). The DFlash drafter's
block: no mask, causal or fully visible, with a sliding window that hides part of the context
(ignoring the window must fail the check). On a GPU also against sglang's own
extend_attention_fwd with the same mask, and in the drafter's modes; every kernel test runs with
each q head in its own program and with each KV head's group packed into one program's rows."""

from __future__ import annotations

import pytest
import torch
from gdn_cases import DEV, HAS_CUDA, interpreter_test, kernels_here

from sglang_ddtree.kernels.tree_attention import split_plan, tree_attention_fwd, tree_attention_reference
from dataclasses import replace

from sglang_ddtree.kernels.tree_attention.splitkv import SplitPlan  # noqa: F401

test_in_triton_interpreter = interpreter_test(__file__)


def _tree_mask(n, g):
    """An ancestor mask (self included) of a random tree over n nodes in topological order."""
    parent = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)]
    anc = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        j = i
        while j >= 0:
            anc[i, j] = True
            j = parent[j]
    return anc


def _case(q_lens, ctx_lens, hq, hkv, d, dtype, seed, causal_instead=False):
    g = torch.Generator().manual_seed(seed)
    bs, T = len(q_lens), sum(q_lens)
    slots = sum(ctx_lens) + 64
    perm = torch.randperm(slots, generator=g)  # context slots scattered over the pool
    kv_indices = perm[: sum(ctx_lens)].to(torch.int32)
    qo = torch.tensor([0] + q_lens).cumsum(0).to(torch.int32)
    kvp = torch.tensor([0] + ctx_lens).cumsum(0).to(torch.int32)
    masks, sizes = [], []
    for n, P in zip(q_lens, ctx_lens):
        anc = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal_instead else _tree_mask(n, g)
        full = torch.cat([torch.rand(n, P, generator=g) < 0.5, anc], dim=1)  # context columns: never read
        masks.append(full.reshape(-1))
        sizes.append(n * (P + n))
    mask = torch.cat(masks)
    mask_indptr = torch.tensor([0] + sizes).cumsum(0).to(torch.int64)
    t = dict(
        q=torch.randn(T, hq, d, generator=g), k_tree=torch.randn(T, hkv, d, generator=g),
        v_tree=torch.randn(T, hkv, d, generator=g), k_buffer=torch.randn(slots, hkv, d, generator=g),
        v_buffer=torch.randn(slots, hkv, d, generator=g))
    t = {k: v.to(dtype).to(DEV) for k, v in t.items()}
    t.update(qo_indptr=qo.to(DEV), kv_indptr=kvp.to(DEV), kv_indices=kv_indices.to(DEV),
             custom_mask=mask.to(DEV), mask_indptr=mask_indptr.to(DEV))
    return t


def _run(t, plan=None, scale=None, causal=True, window=-1):
    d = t["q"].shape[-1]
    scale = scale or d ** -0.5
    o = torch.full_like(t["q"], float("nan"))
    max_q = int((t["qo_indptr"][1:] - t["qo_indptr"][:-1]).max())
    used = tree_attention_fwd(t["q"], t["k_tree"], t["v_tree"], o, t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                              t["kv_indptr"], t["kv_indices"], t["custom_mask"], t["mask_indptr"], max_q, scale,
                              plan=plan, causal=causal, sliding_window=window)
    return o, used


def _rel_err(o, ref):
    assert not torch.isnan(o).any(), "NaN in the output (a row left unwritten or a NaN computed)"
    return float((o.double() - ref).abs().max() / ref.abs().max())


def _ref(t, causal=True, window=-1):
    d = t["q"].shape[-1]
    return tree_attention_reference(t["q"], t["k_tree"], t["v_tree"], t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                                    t["kv_indptr"], t["kv_indices"], t["custom_mask"], t["mask_indptr"], d ** -0.5,
                                    causal=causal, sliding_window=window)


def _unmasked(t):
    return dict(t, custom_mask=None, mask_indptr=None)


TOL = {torch.float32: 2e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}


def _plan(bs, max_q, hq, hkv, d, splits, min_blocks=1, pack=False):
    """The automatic launch shape of these sizes (16 SMs, one stage) with ``splits`` forced."""
    auto = split_plan(bs, max_q, hq, d, sm_count=16, group=hq // hkv, pack_gqa=pack)
    return replace(auto, splits=splits, num_stages=1, min_blocks=min_blocks)


PACK = pytest.mark.parametrize("pack", [False, True], ids=["per-head", "gqa-packed"])


@kernels_here
@pytest.mark.parametrize("q_lens,ctx_lens,hq,hkv,d,dtype,splits", [
    ([17], [45], 4, 2, 32, torch.float32, 1),                  # one kernel
    ([17], [45], 4, 2, 32, torch.float32, 5),                  # split + merge
    ([9, 17, 3], [0, 70, 33], 2, 1, 16, torch.float32, 3),     # ragged windows, an empty context
    ([33, 5], [100, 1], 3, 3, 16, torch.float32, 32),          # two row blocks; more splits than blocks
    ([17, 17], [64, 130], 4, 1, 64, torch.bfloat16, 4),
    ([12], [40], 2, 2, 32, torch.float16, 1),
])
@PACK
def test_equals_the_reference(q_lens, ctx_lens, hq, hkv, d, dtype, splits, pack):
    if dtype == torch.bfloat16 and not HAS_CUDA:
        pytest.skip("Triton's interpreter gets bf16 dots wrong (16 x 16 x 16: off by ~1e10); bf16 runs on a GPU")
    t = _case(q_lens, ctx_lens, hq, hkv, d, dtype, seed=sum(q_lens) * 31 + splits)
    o, used = _run(t, _plan(len(q_lens), max(q_lens), hq, hkv, d, splits, min_blocks=4, pack=pack))
    assert used.splits == splits and used.pack_gqa == (pack and hq > hkv)
    assert _rel_err(o, _ref(t)) < TOL[dtype]


@kernels_here
@pytest.mark.parametrize("ctx_lens,splits,min_blocks", [
    ([700, 5, 0], 3, 4),    # 3 / 1 / 0 active splits of at least 4 key blocks
    ([300, 129], 8, 1),     # one key block per split: every split active, more than the blocks
    ([40, 1000], 32, 2),
])
@PACK
def test_active_splits_follow_the_context_length(ctx_lens, splits, min_blocks, pack):
    t = _case([17] * len(ctx_lens), ctx_lens, 2, 1, 16, torch.float32, seed=sum(ctx_lens) + splits)
    o, _ = _run(t, _plan(len(ctx_lens), 17, 2, 1, 16, splits, min_blocks, pack))
    assert _rel_err(o, _ref(t)) < TOL[torch.float32]


@kernels_here
def test_the_check_sees_the_tree():
    """Attention computed with the causal mask differs from the tree's reference far beyond the
    tolerance, so the checks above would catch a kernel that ignored the tree."""
    causal = _case([17], [30], 2, 1, 32, torch.float32, seed=5, causal_instead=True)
    tree = _case([17], [30], 2, 1, 32, torch.float32, seed=5)
    o, _ = _run(causal)
    assert _rel_err(o, _ref(tree)) > 100 * TOL[torch.float32]


@kernels_here
@pytest.mark.parametrize("q_lens,ctx_lens,causal,window,splits", [
    ([16], [45], True, -1, 1),              # the drafter's sliding layers, window wider than the context
    ([16], [45], False, -1, 3),             # its full layer: every block key visible
    ([16, 16], [100, 7], True, 40, 4),      # a window hiding most of the first context, split + merge
    ([16, 9], [100, 0], False, 40, 1),      # one kernel; an empty context
    ([40], [90], True, 20, 5),              # two row blocks; the window hides block keys too (i > j + 20)
])
@PACK
def test_drafter_modes_equal_the_reference(q_lens, ctx_lens, causal, window, splits, pack):
    t = _unmasked(_case(q_lens, ctx_lens, 4, 2, 32, torch.float32, seed=sum(ctx_lens) + 7 * splits))
    o, _ = _run(t, _plan(len(q_lens), max(q_lens), 4, 2, 32, splits, 1, pack), causal=causal, window=window)
    assert _rel_err(o, _ref(t, causal, window)) < TOL[torch.float32]


@kernels_here
def test_the_check_sees_the_window_and_the_causal_rule():
    """Ignoring the sliding window, or attending to later block keys, misses the reference far
    beyond the tolerance: the drafter-mode checks above would catch either."""
    t = _unmasked(_case([16], [100], 2, 1, 32, torch.float32, seed=3))
    o, _ = _run(t, causal=True)
    assert _rel_err(o, _ref(t, True, 40)) > 100 * TOL[torch.float32]
    o, _ = _run(t, causal=False)
    assert _rel_err(o, _ref(t, True)) > 100 * TOL[torch.float32]


@kernels_here
@pytest.mark.parametrize("splits", [1, 4])
@PACK
def test_rows_past_the_last_window_are_left_alone(splits, pack):
    """A captured graph's padded batch: q holds more rows than the windows; those rows of o keep
    what they held."""
    t = _case([9, 17], [30, 70], 4, 2, 16, torch.float32, seed=11)
    pad = 5
    for k in ("q", "k_tree", "v_tree"):
        t[k] = torch.cat([t[k], torch.randn(pad, *t[k].shape[1:], device=t[k].device)])
    o = torch.full_like(t["q"], 7.0)
    tree_attention_fwd(t["q"], t["k_tree"], t["v_tree"], o, t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                       t["kv_indptr"], t["kv_indices"], t["custom_mask"], t["mask_indptr"], 17, 16 ** -0.5,
                       plan=_plan(2, 17, 4, 2, 16, splits, 1, pack))
    assert bool((o[-pad:] == 7.0).all())
    assert _rel_err(o[:-pad], _ref(t)[:-pad]) < TOL[torch.float32]


def test_custom_mask_needs_causal():
    t = _case([4], [5], 1, 1, 16, torch.float32, seed=2)
    with pytest.raises(ValueError, match="causal=True"):
        _run(t, causal=False)
    with pytest.raises(ValueError, match="causal=True"):
        _ref(t, causal=False)


def test_split_plan_targets_waves_and_caps():
    one = split_plan(1, 17, 24, 256, sm_count=132)
    assert (one.block_m, one.q_blocks, one.block_n) == (32, 1, 32) and one.splits == 32  # 8 waves: 44, capped
    assert split_plan(16, 17, 24, 256, 132).splits == 2
    assert split_plan(64, 17, 24, 256, 132).splits == 1
    assert split_plan(1, 65, 24, 256, 132).q_blocks == 3
    assert split_plan(1, 8, 1, 128, 10_000).splits == 32          # capped
    assert split_plan(1, 17, 24, 256, 188, (12, 0)).num_stages == 1  # sm_120: one stage
    # GQA packing (the 27B target: 6 q heads per KV head): 17 x 6 = 102 rows in two 64-row
    # blocks over 4 KV heads, eight warps for 64 rows of 256; the drafter's 16 x 4 rows in one block
    packed = split_plan(1, 17, 24, 256, 132, group=6, pack_gqa=True)
    assert (packed.block_m, packed.q_blocks, packed.num_warps, packed.pack_gqa) == (64, 2, 8, True)
    assert packed.splits == 32 and split_plan(16, 17, 24, 256, 132, group=6, pack_gqa=True).splits == 8
    drafter = split_plan(1, 16, 32, 128, 132, group=4, pack_gqa=True)
    assert (drafter.block_m, drafter.q_blocks, drafter.num_warps) == (64, 1, 4)
    assert not split_plan(1, 17, 4, 64, 132, group=1, pack_gqa=True).pack_gqa  # nothing to pack


def test_reference_refuses_a_row_with_nothing_to_attend():
    t = _case([3], [0], 1, 1, 16, torch.float32, seed=1)
    t["custom_mask"] = torch.zeros_like(t["custom_mask"])
    with pytest.raises(ValueError, match="attends to nothing"):
        _ref(t)


@pytest.mark.skipif(not HAS_CUDA, reason="sglang's extend_attention_fwd is compiled for a GPU")
@pytest.mark.parametrize("bs,n,ctx", [(1, 17, 545), (16, 17, 700), (2, 65, 2048)])
@PACK
def test_matches_sglang_extend_attention(bs, n, ctx, pack):
    """Same inputs through sglang's extend_attention_fwd (custom mask, causal): both within bf16
    tolerance of the float64 reference, at Qwen3.6-27B's attention shape (24 / 4 heads of 256)."""
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    t = _case([n] * bs, [ctx] * bs, 24, 4, 256, torch.bfloat16, seed=bs * 7 + n)
    ref = _ref(t)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    o, used = _run(t, split_plan(bs, n, 24, 256, sms, torch.cuda.get_device_capability(0), group=6, pack_gqa=pack))
    assert used.pack_gqa == pack
    o_up = torch.full_like(t["q"], float("nan"))
    extend_attention_fwd(t["q"], t["k_tree"], t["v_tree"], o_up, t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                         t["kv_indptr"], t["kv_indices"], t["custom_mask"], True, t["mask_indptr"], n, 1.0, 1.0,
                         256 ** -0.5)
    assert _rel_err(o, ref) < TOL[torch.bfloat16]
    assert _rel_err(o_up, ref) < TOL[torch.bfloat16]


@pytest.mark.skipif(not HAS_CUDA, reason="sglang's extend_attention_fwd is compiled for a GPU")
@pytest.mark.parametrize("bs,ctx,causal,window", [(1, 545, True, 2048), (16, 700, False, -1), (4, 3000, True, 2048),
                                                  (2, 700, True, 300)])
@PACK
def test_matches_sglang_in_the_drafter_modes(bs, ctx, causal, window, pack):
    """The DFlash drafter's attention (Qwen3.6-27B drafter: 32 / 8 heads of 128, a 16-token
    block, no mask, causal sliding layers and a full layer) through both kernels: both within
    bf16 tolerance of the float64 reference, the window binding in two of the cases."""
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    t = _unmasked(_case([16] * bs, [ctx] * bs, 32, 8, 128, torch.bfloat16, seed=bs * 5 + ctx))
    ref = _ref(t, causal, window)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    o, _ = _run(t, split_plan(bs, 16, 32, 128, sms, torch.cuda.get_device_capability(0), group=4, pack_gqa=pack),
                causal=causal, window=window)
    o_up = torch.full_like(t["q"], float("nan"))
    extend_attention_fwd(t["q"], t["k_tree"], t["v_tree"], o_up, t["k_buffer"], t["v_buffer"], t["qo_indptr"],
                         t["kv_indptr"], t["kv_indices"], None, causal, None, 16, 1.0, 1.0, 128 ** -0.5,
                         sliding_window_size=window)
    assert _rel_err(o, ref) < TOL[torch.bfloat16]
    assert _rel_err(o_up, ref) < TOL[torch.bfloat16]
