"""Each op of the CPU ``sgl_kernel`` stand-in against an independent reference.

The attention references are dense float64 softmax attention over explicitly built
visibility masks; the bookkeeping ops are checked against hand-computed expectations or
brute-force walks over explicit parent arrays.
"""

from __future__ import annotations

import random

import pytest
import torch

import sgl_kernel  # the stand-in, from test/harness
from sgl_kernel import speculative as spec
from sgl_kernel import _ops


def _ref_attention(q, k, v, visible, scale, cap=0.0):
    """Dense float64 attention: q [nq,H,D], k/v [nk,Hkv,*], visible [nq,nk]."""
    rep = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(rep, 1)
    v = v.double().repeat_interleave(rep, 1)
    s = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
    if cap > 0:
        s = cap * torch.tanh(s / cap)
    s = s.masked_fill(~visible, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v)


def _paged_batch(gen, bs, prefix_lens, ext_lens, h=4, hkv=2, d=8, pool=256):
    """Random KV pool with shuffled slots; returns everything extend_attention_cpu needs."""
    total = [p + e for p, e in zip(prefix_lens, ext_lens)]
    slots = torch.randperm(pool, generator=gen)[: sum(total)]
    req_to_token = torch.zeros((bs + 2, 64), dtype=torch.int32)
    req_rows = torch.tensor([bs + 1 - i for i in range(bs)], dtype=torch.int64)
    k_buf = torch.randn(pool, hkv, d, generator=gen)
    v_buf = torch.randn(pool, hkv, d, generator=gen)
    off = 0
    for i in range(bs):
        req_to_token[req_rows[i], : total[i]] = slots[off : off + total[i]].int()
        off += total[i]
    n_ext = sum(ext_lens)
    q = torch.randn(n_ext, h, d, generator=gen)
    # The extend tokens' K/V are already stored in the pool (sglang saves them first).
    k_ext = torch.empty(n_ext, hkv, d)
    v_ext = torch.empty(n_ext, hkv, d)
    start = 0
    for i in range(bs):
        for j in range(ext_lens[i]):
            slot = int(req_to_token[req_rows[i], prefix_lens[i] + j])
            k_ext[start + j] = k_buf[slot]
            v_ext[start + j] = v_buf[slot]
        start += ext_lens[i]
    return dict(
        q=q, k_ext=k_ext, v_ext=v_ext, k_buf=k_buf, v_buf=v_buf, req_to_token=req_to_token,
        rows=req_rows, seq_lens=torch.tensor(total), ext=torch.tensor(ext_lens),
        starts=torch.tensor([sum(ext_lens[:i]) for i in range(bs)]),
    )


def _run_extend(b, tree_mask=None, window=0, cap=0.0, scale=0.3):
    out = torch.full_like(b["q"], float("nan"))
    _extend_op(
        b["q"], b["k_ext"], b["v_ext"], out, b["k_buf"], b["v_buf"], b["req_to_token"],
        b["rows"], b["seq_lens"], b["ext"], b["starts"], int(b["ext"].max()), scale, cap,
        False, window, None, None, tree_mask,
    )
    return out


def _extend_op(q, k, v, o, k_buf, v_buf, *rest):
    """The registered op in the installed sglang release's argument order (0.5.23: KV scales after
    the buffers, ``is_causal`` last)."""
    if _ops.RELEASE == "0.5.23":
        return torch.ops.sgl_kernel.extend_attention_cpu(q, k, v, o, k_buf, v_buf, 1.0, 1.0, *rest, True)
    return torch.ops.sgl_kernel.extend_attention_cpu(q, k, v, o, k_buf, v_buf, *rest)


def _decode_op(q, k_cache, v_cache, *rest):
    if _ops.RELEASE == "0.5.23":
        return torch.ops.sgl_kernel.decode_attention_cpu(q, k_cache, v_cache, 1.0, 1.0, *rest)
    return torch.ops.sgl_kernel.decode_attention_cpu(q, k_cache, v_cache, *rest)


def test_the_0_5_23_argument_lists_refuse_what_the_stand_in_does_not_compute():
    t = torch.zeros(1)
    with pytest.raises(NotImplementedError, match="scaled"):
        _ops.decode_attention_cpu_v0523(t, t, t, 0.5, 1.0, *([t] * 8), 1.0, 0.0, False, 0, None, None)
    with pytest.raises(NotImplementedError, match="scaled"):
        _ops.extend_attention_cpu_v0523(*([t] * 6), 1.0, 2.0, *([t] * 5), 1, 1.0, 0.0, False, 0, None, None, None,
                                        True)


def test_extend_attention_non_causal_sees_every_token_of_the_request():
    """sglang 0.5.23's ``is_causal=False`` (DFlash's draft layers): every new token sees the
    prefix and every new token."""
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    b = _paged_batch(gen, 3, [4, 0, 7], [5, 3, 1])
    out = torch.full_like(b["q"], float("nan"))
    _ops.extend_attention_cpu(
        b["q"], b["k_ext"], b["v_ext"], out, b["k_buf"], b["v_buf"], b["req_to_token"], b["rows"], b["seq_lens"],
        b["ext"], b["starts"], int(b["ext"].max()), 0.3, 0.0, False, 0, None, None, None, False)
    ref = _ref_extend(b, lambda i, prefix, ext, total: torch.ones(ext, total, dtype=torch.bool))
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def _ref_extend(b, visible_fn, cap=0.0, scale=0.3):
    outs = []
    for i in range(len(b["rows"])):
        total, ext = int(b["seq_lens"][i]), int(b["ext"][i])
        prefix = total - ext
        slots = b["req_to_token"][b["rows"][i], :total].long()
        vis = visible_fn(i, prefix, ext, total)
        s = int(b["starts"][i])
        outs.append(_ref_attention(b["q"][s : s + ext], b["k_buf"][slots], b["v_buf"][slots], vis, scale, cap))
    return torch.cat(outs)


def _causal(i, prefix, ext, total):
    q_pos = torch.arange(prefix, total).unsqueeze(1)
    return torch.arange(total).unsqueeze(0) <= q_pos


@pytest.mark.parametrize("cap", [0.0, 5.0])
def test_extend_attention_causal_matches_dense_reference(cap):
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    b = _paged_batch(gen, 3, [0, 5, 11], [4, 1, 7])
    out = _run_extend(b, cap=cap)
    ref = _ref_extend(b, _causal, cap=cap)
    assert not out.isnan().any()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_extend_attention_sliding_window():
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    b = _paged_batch(gen, 2, [9, 3], [5, 6])
    window = 4  # sglang passes sliding_window_size + 1

    def vis(i, prefix, ext, total):
        q_pos = torch.arange(prefix, total).unsqueeze(1)
        k_pos = torch.arange(total).unsqueeze(0)
        return (k_pos <= q_pos) & (k_pos > q_pos - window)

    torch.testing.assert_close(_run_extend(b, window=window).double(), _ref_extend(b, vis), rtol=1e-5, atol=1e-5)


def _random_tree_masks(gen, ext_lens):
    """Random ancestor masks (node 0 = root, parent index < own index)."""
    masks = []
    for n in ext_lens:
        m = torch.zeros(n, n, dtype=torch.bool)
        for x in range(n):
            m[x, x] = True
            if x > 0:
                p = int(torch.randint(0, x, (1,), generator=gen))
                m[x] |= m[p]
        masks.append(m)
    return masks


@pytest.mark.parametrize("layout", ["qlen_only", "full_mask"])
def test_extend_attention_tree_mask_layouts(layout):
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    ext_lens = [6, 6, 6]
    b = _paged_batch(gen, 3, [3, 0, 8], ext_lens)
    masks = _random_tree_masks(gen, ext_lens)
    if layout == "qlen_only":
        flat = torch.cat([m.flatten() for m in masks])
    else:
        blocks = []
        for i, m in enumerate(masks):
            total = int(b["seq_lens"][i])
            blk = torch.ones(ext_lens[i], total, dtype=torch.bool)
            blk[:, total - ext_lens[i] :] = m
            blocks.append(blk.flatten())
        flat = torch.cat(blocks)

    def vis(i, prefix, ext, total):
        v = torch.ones(ext, total, dtype=torch.bool)
        v[:, prefix:] = masks[i]
        return v

    out = _run_extend(b, tree_mask=flat)
    torch.testing.assert_close(out.double(), _ref_extend(b, vis), rtol=1e-5, atol=1e-5)
    # The mask must matter: a causal run differs on this random tree.
    assert not torch.allclose(out, _run_extend(b))


def test_extend_attention_rejects_mask_of_wrong_size():
    gen = torch.Generator().manual_seed(0)
    b = _paged_batch(gen, 1, [2], [3])
    with pytest.raises(Exception, match="tree_mask has"):
        _run_extend(b, tree_mask=torch.ones(7, dtype=torch.bool))


def test_decode_attention_writes_kv_then_attends():
    gen = torch.Generator().manual_seed(random.randrange(1 << 30))
    bs, h, hkv, d, pool = 3, 4, 2, 8, 128
    lens = [5, 1, 9]
    k_cache = torch.randn(pool, hkv, d, generator=gen)
    v_cache = torch.randn(pool, hkv, d, generator=gen)
    req_to_token = torch.zeros(4, 32, dtype=torch.int32)
    slots = torch.randperm(pool, generator=gen)
    off = 0
    for i, n in enumerate(lens):
        req_to_token[i + 1, :n] = slots[off : off + n].int()
        off += n
    rows = torch.tensor([1, 2, 3])
    loc = torch.tensor([int(req_to_token[i + 1, n - 1]) for i, n in enumerate(lens)])
    q = torch.randn(bs, h, d, generator=gen)
    k_new = torch.randn(bs, hkv, d, generator=gen)
    v_new = torch.randn(bs, hkv, d, generator=gen)
    out = torch.full((bs, h, d), float("nan"))
    _decode_op(
        q, k_cache, v_cache, out, k_new, v_new, loc, torch.zeros(1), req_to_token, rows,
        torch.tensor(lens), 0.25, 0.0, False, 0, None, None,
    )
    torch.testing.assert_close(k_cache[loc], k_new)
    torch.testing.assert_close(v_cache[loc], v_new)
    for i, n in enumerate(lens):
        s = req_to_token[i + 1, :n].long()
        ref = _ref_attention(q[i : i + 1], k_cache[s], v_cache[s], torch.ones(1, n, dtype=torch.bool), 0.25)
        torch.testing.assert_close(out[i : i + 1].double(), ref, rtol=1e-5, atol=1e-5)


def test_req_to_token_assign_and_extend_locs_roundtrip():
    req_to_token = torch.zeros(3, 10, dtype=torch.int32)
    rows = torch.tensor([2, 0])
    start, end = torch.tensor([1, 0]), torch.tensor([4, 2])
    locs = torch.tensor([11, 12, 13, 21, 22])
    sgl_kernel.assign_req_to_token_pool_cpu(rows, req_to_token, start, end, locs, 10)
    assert req_to_token[2, 1:4].tolist() == [11, 12, 13]
    assert req_to_token[0, 0:2].tolist() == [21, 22]
    assert req_to_token[1].abs().sum() == 0
    back = torch.zeros(5, dtype=torch.int64)
    sgl_kernel.assign_extend_cache_locs_cpu(rows, req_to_token, start, end, back, 10)
    assert back.tolist() == locs.tolist()


def test_draft_cache_locs_and_draft_decode_metadata():
    req_to_token = torch.arange(40, dtype=torch.int32).view(2, 20)
    rows, seq_lens = torch.tensor([1, 0]), torch.tensor([3, 5])
    out = torch.zeros(2 * 2 * 3, dtype=torch.int64)
    sgl_kernel.assign_draft_cache_locs_contiguous_cpu(rows, req_to_token, seq_lens, out, 20, 2, 3)
    assert out.tolist() == [23, 24, 25, 26, 27, 28, 5, 6, 7, 8, 9, 10]
    meta = sgl_kernel.build_draft_decode_metadata_cpu(req_to_token, rows, seq_lens, 2, 3, 20)
    # request 0 (row 1, prefix 3), branch 1: prefix slots, then its own 3 draft slots.
    assert meta[1, :6].tolist() == [20, 21, 22, 26, 27, 28]
    assert meta[2, :8].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]


def test_fill_bonus_and_accept_out_cache_loc():
    accept_tokens = torch.tensor([[7, 8, 9, 0], [4, 0, 0, 0]])
    bonus = torch.zeros(2, dtype=torch.int64)
    sgl_kernel.fill_bonus_tokens_cpu(accept_tokens, torch.tensor([3, 1]), bonus, 4)
    assert bonus.tolist() == [9, 4]
    accept_index = torch.tensor([[0, 2, -1], [3, -1, -1]])
    out_cache_loc = torch.tensor([100, 101, 102, 103])
    acc = torch.zeros(6, dtype=torch.int64)
    sgl_kernel.fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, acc)
    assert acc[:3].tolist() == [100, 102, 103]


def test_copy_all_layer_kv_cache_moves_rows_in_every_buffer():
    bufs = [torch.randn(10, 2, 4) for _ in range(3)]
    before = [b.clone() for b in bufs]
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.uint64)
    strides = torch.tensor([b[0].numel() * b.element_size() for b in bufs])
    # Overlapping move (as when accepted rows shift left): reads happen before writes.
    sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([1, 2]), torch.tensor([2, 5]))
    for b, o in zip(bufs, before):
        torch.testing.assert_close(b[1], o[2])
        torch.testing.assert_close(b[2], o[5])
        torch.testing.assert_close(b[0], o[0])
        torch.testing.assert_close(b[3:], o[3:])


def _eagle_inputs_for(parents):
    """Encode an explicit tree as EAGLE's (parent_list, selected_index, topk).

    EAGLE names node i's parent through ``tb = selected_index[i-1] // topk``: 0 means the
    root, otherwise the parent is the node whose selected value equals ``parent_list[tb]``.
    With topk = n, ``selected = parent * n + i`` is unique per node and ``tb = parent``.
    """
    n = len(parents)
    sel = [parents[i] * n + i for i in range(1, n)]
    plist = [0] + sel  # parent_list[p] = node p's selected value
    return torch.tensor([plist]), torch.tensor([sel]), n


def _ref_tree(parents):
    n = len(parents)
    depth = [0] * n
    anc = [{0}] + [set() for _ in range(n - 1)]
    for i in range(1, n):
        depth[i] = depth[parents[i]] + 1
        anc[i] = anc[parents[i]] | {i}
    return depth, anc


@pytest.mark.parametrize("parents", [[-1, 0, 0, 1, 1, 2], [-1, 0, 1, 2, 3], [-1, 0, 0, 0, 3, 3, 4]])
def test_build_tree_and_reconstruct_agree_with_explicit_tree(parents):
    n = len(parents)
    plist, sel, topk = _eagle_inputs_for(parents)
    depth, anc = _ref_tree(parents)
    seq_len = 7
    bufs = [torch.full((1, n), -1, dtype=torch.long) for _ in range(3)]
    positions = torch.empty(n, dtype=torch.long)
    mask = torch.ones(n * (seq_len + n), dtype=torch.bool)
    spec.build_tree_kernel_efficient_cpu(
        plist, sel, torch.tensor([seq_len]), mask, positions, *bufs, topk, 8, n, spec.FULL_MASK
    )
    assert positions.tolist() == [seq_len + d for d in depth]
    m = mask.view(n, seq_len + n)
    assert m[:, :seq_len].all()
    for x in range(n):
        assert {j for j in range(n) if m[x, seq_len + j]} == anc[x]
    ridx, nxt, sib = bufs
    # Children of every node, by following first-child then next-sibling links.
    for p in range(n):
        kids, c = [], int(nxt[0, p])
        while c != -1:
            kids.append(c)
            c = int(sib[0, c])
        assert kids == [i for i in range(1, n) if parents[i] == p]
    # The QLEN_ONLY mask rebuilt into links gives the same structure.
    qmask = torch.stack([m[x, seq_len:] for x in range(n)]).flatten()
    rb = [torch.full((1, n), -1, dtype=torch.long) for _ in range(3)]
    pos2 = torch.empty(n, dtype=torch.long)
    spec.reconstruct_indices_from_tree_mask(qmask, torch.tensor([seq_len]), pos2, *rb, 1, n)
    assert pos2.tolist() == positions.tolist()
    for a, b in zip(rb, bufs):
        assert a.tolist() == b.tolist()


def _ref_greedy_walk(parents, cand, target):
    """Brute force: the deepest node whose whole path matches the target's predictions."""
    n = len(parents)
    path = [0]
    while True:
        kids = [i for i in range(1, n) if parents[i] == path[-1] and cand[i] == target[path[-1]]]
        if not kids:
            return path
        path.append(min(kids))


def test_verify_tree_greedy_matches_brute_force_walk():
    rng = random.Random()
    for _ in range(200):
        n = rng.randint(2, 9)
        parents = [-1] + [rng.randrange(0, i) for i in range(1, n)]
        cand = [rng.randrange(3) for _ in range(n)]
        target = [rng.randrange(3) for _ in range(n)]
        nxt = torch.full((1, n), -1, dtype=torch.long)
        sib = torch.full((1, n), -1, dtype=torch.long)
        for i in range(n - 1, 0, -1):
            prev = int(nxt[0, parents[i]])
            nxt[0, parents[i]] = i
            sib[0, i] = prev
        steps = max(_ref_tree(parents)[0]) + 1
        predicts = torch.full((n,), -7, dtype=torch.long)
        accept_index = torch.full((1, steps), -1, dtype=torch.long)
        accept_num = torch.zeros(1, dtype=torch.long)
        spec.verify_tree_greedy_cpu(
            predicts, accept_index, accept_num, torch.tensor([cand]),
            torch.arange(n).view(1, n), nxt, sib, torch.tensor([target]),
        )
        path = _ref_greedy_walk(parents, cand, target)
        assert int(accept_num[0]) == len(path) - 1
        assert accept_index[0, : len(path)].tolist() == path
        for a, b in zip(path, path[1:]):
            assert int(predicts[a]) == cand[b]
        assert int(predicts[path[-1]]) == target[path[-1]]


def test_rotate_input_ids():
    ids = torch.tensor([1, 2, 3, 4, 5, 6])
    sgl_kernel.rotate_input_ids_cpu(ids, torch.tensor([0, 3]), torch.tensor([3, 3]), torch.tensor([9, 8]))
    assert ids.tolist() == [2, 3, 9, 5, 6, 8]


def test_missing_kernels_import_but_fail_loudly():
    from sgl_kernel.flash_attn import flash_attn_varlen_func  # a submodule we never implement

    with pytest.raises(NotImplementedError, match="flash_attn_varlen_func"):
        flash_attn_varlen_func()
    # We must not advertise AMX packed GEMMs: layers then keep their torch paths.
    assert not hasattr(torch.ops.sgl_kernel, "convert_weight_packed")
