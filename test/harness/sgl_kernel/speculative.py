"""Plain-torch versions of the speculative-decoding helpers sglang's CPU path imports by name.

Each mirrors the contract of the op sglang calls on CPU (argument order as at the call sites in
sglang 0.5.17: ``mem_cache/allocation.py``, ``speculative/spec_utils.py``,
``speculative/eagle_utils.py``, ``speculative/eagle_worker_common.py``,
``kernels/ops/speculative/eagle.py``, ``kernels/ops/kvcache/cache_move.py``,
``layers/attention/intel_amx_backend.py``). Outputs are written in place, as the kernels do.
Loops are per request in Python: these run on tiny test batches only.
"""

from __future__ import annotations

import ctypes
from typing import Optional

import torch

# sglang's TreeMaskMode values (speculative/eagle_utils.py).
FULL_MASK = 0
QLEN_ONLY = 1
QLEN_ONLY_BITPACKING = 2


def assign_req_to_token_pool_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len
):
    """req_to_token[row, start:end] = the next (end - start) entries of out_cache_loc."""
    off = 0
    for i in range(req_pool_indices.numel()):
        s, e = int(start_offset[i]), int(end_offset[i])
        req_to_token[int(req_pool_indices[i]), s:e] = out_cache_loc[off : off + e - s].to(
            req_to_token.dtype
        )
        off += e - s


def assign_extend_cache_locs_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len
):
    """Inverse of the above: out_cache_loc (packed) = req_to_token[row, start:end] per request."""
    off = 0
    for i in range(req_pool_indices.numel()):
        s, e = int(start_offset[i]), int(end_offset[i])
        out_cache_loc[off : off + e - s] = req_to_token[int(req_pool_indices[i]), s:e].to(
            out_cache_loc.dtype
        )
        off += e - s


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, num_steps
):
    """out_cache_loc[b] = req_to_token[row_b, seq_len_b : seq_len_b + topk * num_steps]."""
    n = topk * num_steps
    for i in range(req_pool_indices.numel()):
        s = int(seq_lens[i])
        out_cache_loc[i * n : (i + 1) * n] = req_to_token[int(req_pool_indices[i]), s : s + n].to(
            out_cache_loc.dtype
        )


def build_draft_decode_metadata_cpu(
    req_to_token, req_pool_indices, seq_lens, topk, num_steps, pool_len
):
    """Per (request, branch) row: the committed prefix, then that branch's draft slots.

    Branch k of request b owns the slots ``seq_len + k * num_steps + [0, num_steps)`` (page
    size 1 / contiguous layout), so step s of the draft decode attends to
    ``row[: seq_len + s + 1]``.
    """
    bs = req_pool_indices.numel()
    out = torch.zeros((bs * topk, pool_len), dtype=req_to_token.dtype)
    for b in range(bs):
        row = req_to_token[int(req_pool_indices[b])]
        s = int(seq_lens[b])
        for k in range(topk):
            r = out[b * topk + k]
            r[:s] = row[:s]
            r[s : s + num_steps] = row[s + k * num_steps : s + (k + 1) * num_steps]
    return out


def fill_bonus_tokens_cpu(accept_tokens, accept_lens, bonus_tokens, accept_stride):
    """bonus_tokens[b] = the last accepted token of request b (accept_lens counts the bonus)."""
    flat = accept_tokens.reshape(-1)
    for b in range(accept_lens.numel()):
        bonus_tokens[b] = flat[accept_stride * b + int(accept_lens[b]) - 1]


def fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, accept_out_cache_loc):
    """Compact out_cache_loc[accept_index] over the entries of accept_index that are not -1."""
    idx = accept_index.reshape(-1)
    keep = idx[idx != -1].long()
    accept_out_cache_loc[: keep.numel()] = out_cache_loc[keep].to(accept_out_cache_loc.dtype)


def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    """For every buffer (one per layer and K/V), copy row src_loc[j] to row tgt_loc[j].

    ``data_ptrs[i]`` is the base address of buffer i and ``strides[i]`` its row size in bytes
    (sglang passes raw pointers so one launch covers all layers).
    """
    src = [int(x) for x in src_loc.tolist()]
    tgt = [int(x) for x in tgt_loc.tolist()]
    for base, stride in zip(data_ptrs.tolist(), strides.tolist()):
        base, stride = int(base), int(stride)
        rows = [ctypes.string_at(base + s * stride, stride) for s in src]  # read all first
        for t, data in zip(tgt, rows):
            ctypes.memmove(base + t * stride, data, stride)


def _eagle_parents(selected_index, parent_list, topk: int, n: int) -> list[int]:
    """Parent position (0 = root) of each draft node 1..n-1, from EAGLE's selection lists."""
    parents = [-1] * n
    sel = selected_index.tolist()
    plist = parent_list.tolist()
    for i in range(1, n):
        tb = sel[i - 1] // topk
        if tb == 0:
            parents[i] = 0
            continue
        want = plist[tb]
        parents[i] = next((pp + 1 for pp in range(n - 1) if sel[pp] == want), 0)
    return parents


def build_tree_kernel_efficient_cpu(
    parent_list,
    selected_index,
    verified_seq_len,
    tree_mask,
    positions,
    retrieve_index,
    retrieve_next_token,
    retrieve_next_sibling,
    topk: int,
    depth: int,
    draft_token_num: int,
    tree_mask_mode: int,
):
    """EAGLE tree layout: ancestor mask, depth positions, first-child / next-sibling links.

    Children of a node are linked in increasing node order (first child = smallest index).
    """
    n = draft_token_num
    bs = verified_seq_len.numel()
    mask_off = 0
    for b in range(bs):
        seq_len = int(verified_seq_len[b])
        parents = _eagle_parents(selected_index[b], parent_list[b], topk, n)
        retrieve_index[b] = torch.arange(b * n, (b + 1) * n)
        for i in range(n - 1, 0, -1):
            p = parents[i]
            prev = int(retrieve_next_token[b, p])
            retrieve_next_token[b, p] = i
            if prev != -1:
                retrieve_next_sibling[b, i] = prev
        for x in range(n):
            anc = [x]
            while anc[-1] != 0:
                anc.append(parents[anc[-1]])
            positions[b * n + x] = seq_len + len(anc) - 1
            if tree_mask_mode == FULL_MASK:
                width = seq_len + n
                row = tree_mask[mask_off + x * width : mask_off + (x + 1) * width]
                row[:seq_len] = True
                row[seq_len:] = False
                row[[seq_len + a for a in anc]] = True
            elif tree_mask_mode == QLEN_ONLY:
                row = tree_mask[(b * n + x) * n : (b * n + x + 1) * n]
                row[:] = False
                row[anc] = True
            else:
                raise NotImplementedError(
                    "sgl_kernel stand-in: build_tree_kernel_efficient_cpu supports FULL_MASK "
                    f"and QLEN_ONLY, got tree_mask_mode={tree_mask_mode}"
                )
        mask_off += n * (seq_len + n)


def verify_tree_greedy_cpu(
    predicts,
    accept_index,
    accept_token_num,
    candidates,
    retrive_index,
    retrive_next_token,
    retrive_next_sibling,
    target_predict,
):
    """Greedy tree walk: follow the child whose token equals the target's argmax at the node."""
    bs, n = candidates.shape
    steps = accept_index.shape[1]
    tp = target_predict.reshape(-1)
    for b in range(bs):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted = 0
        cur = 0
        for _ in range(1, steps):
            cur = int(retrive_next_token[b, cur])
            target = int(tp[last])
            matched = False
            while cur != -1:
                if int(candidates[b, cur]) == target:
                    predicts[last] = target
                    accepted += 1
                    last = int(retrive_index[b, cur])
                    accept_index[b, accepted] = last
                    matched = True
                    break
                cur = int(retrive_next_sibling[b, cur])
            if not matched:
                break
        accept_token_num[b] = accepted
        predicts[last] = int(tp[last])


def verify_tree_greedy(**kwargs):
    """Same contract as the CUDA op; sglang calls it by keyword."""
    verify_tree_greedy_cpu(**kwargs)


def build_tree_kernel_efficient(*args, **kwargs):
    build_tree_kernel_efficient_cpu(*args, **kwargs)


def reconstruct_indices_from_tree_mask(
    tree_mask, verified_seq_len, positions, retrieve_index, retrieve_next_token,
    retrieve_next_sibling, batch_size: int, draft_token_num: int,
):
    """From a QLEN_ONLY ancestor mask [bs, n, n]: depth positions and child/sibling links.

    A node's parent is its deepest proper ancestor; children link in increasing node order.
    """
    n = draft_token_num
    m = tree_mask.reshape(batch_size, n, n).bool()
    for b in range(batch_size):
        seq_len = int(verified_seq_len[b])
        depth = m[b].sum(dim=1) - 1
        for i in range(n):
            retrieve_index[b, i] = b * n + i
            positions[b * n + i] = seq_len + int(depth[i])
        for i in range(n - 1, 0, -1):
            anc = [j for j in range(i) if m[b, i, j]]
            p = max(anc, key=lambda j: int(depth[j]))
            prev = int(retrieve_next_token[b, p])
            retrieve_next_token[b, p] = i
            if prev != -1:
                retrieve_next_sibling[b, i] = prev


def rotate_input_ids_cpu(input_ids, extend_start_loc, extend_seq_lens, topk_index, select_index=None):
    """Shift each request's extend ids left by one and put its new token last (or at select_index)."""
    for i in range(extend_seq_lens.numel()):
        s, n = int(extend_start_loc[i]), int(extend_seq_lens[i])
        if n <= 0:
            continue
        input_ids[s : s + n - 1] = input_ids[s + 1 : s + n].clone()
        pos = int(select_index[i]) if select_index is not None else s + n - 1
        input_ids[pos] = topk_index[i]
