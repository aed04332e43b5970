"""Plain-torch versions of the ``torch.ops.sgl_kernel`` attention ops the intel_amx backend calls.

Semantics follow the call sites in ``sglang/srt/layers/attention/intel_amx_backend.py``:

``extend_attention_cpu``: the new tokens' K/V are already in the paged buffers. For request i
with total length ``seq_lens[i]`` and ``extend_seq_lens[i]`` new tokens, the first
``seq_lens[i] - extend_seq_lens[i]`` cached tokens are the prefix (always visible); the new
tokens see each other causally, or, when ``tree_mask`` is given, through it. ``tree_mask`` is
either sglang's QLEN_ONLY layout (per request a row-major ``[extend_len_i, extend_len_i]`` bool
block over the new tokens; what ``default_tree_mask_mode()`` picks on CPU) or its FULL_MASK
layout (per request ``[extend_len_i, seq_len_i]``, prefix columns included); blocks are
concatenated in batch order and the layout is told apart by the total size (the two coincide
only when every prefix is empty, where they mean the same thing).

``decode_attention_cpu``: one query per request; writes the new token's K/V at ``loc`` first
(the real kernel does this in-kernel), then attends over ``seq_lens[i]`` cached tokens.

Sliding window: ``window`` is sglang's ``sliding_window_size + 1`` (0 when the layer has no
window); a query at absolute position p sees keys at positions > p - window.
"""

from __future__ import annotations

from typing import Optional

import torch

LIB = torch.library.Library("sgl_kernel", "DEF")  # noqa: TOR901


def _attend(
    q: torch.Tensor,  # [nq, H, D]
    k: torch.Tensor,  # [nk, Hkv, D]
    v: torch.Tensor,  # [nk, Hkv, Dv]
    visible: torch.Tensor,  # [nq, nk] bool
    sm_scale: float,
    logit_cap: float,
) -> torch.Tensor:
    h, hkv = q.shape[1], k.shape[1]
    rep = h // hkv
    kf = k.float().repeat_interleave(rep, dim=1)
    vf = v.float().repeat_interleave(rep, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.float(), kf) * sm_scale
    if logit_cap > 0:
        s = logit_cap * torch.tanh(s / logit_cap)
    s = s.masked_fill(~visible.unsqueeze(0), float("-inf"))
    p = torch.softmax(s, dim=-1)
    # A query with nothing visible (cannot happen in valid batches) yields zeros, not NaN.
    p = torch.nan_to_num(p, nan=0.0)
    return torch.einsum("hqk,khd->qhd", p, vf)


def _window_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int) -> torch.Tensor:
    if window <= 0:
        return torch.ones(q_pos.numel(), k_pos.numel(), dtype=torch.bool)
    return k_pos.unsqueeze(0) > (q_pos.unsqueeze(1) - window)


def _check_unsupported(is_cross_attention: bool, sinks: Optional[torch.Tensor]) -> None:
    if is_cross_attention:
        raise NotImplementedError("sgl_kernel stand-in: cross attention is not implemented")
    if sinks is not None:
        raise NotImplementedError("sgl_kernel stand-in: attention sinks are not implemented")


def extend_attention_cpu(
    q_extend: torch.Tensor,
    k_extend: torch.Tensor,
    v_extend: torch.Tensor,
    o_extend: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    extend_start_loc: torch.Tensor,
    max_len_extend: int,
    sm_scale: float,
    logit_cap: float,
    is_cross_attention: bool,
    window: int,
    encoder_lens: Optional[torch.Tensor],
    sinks: Optional[torch.Tensor],
    tree_mask: Optional[torch.Tensor],
    is_causal: bool = True,
) -> None:
    """``is_causal=False`` (sglang 0.5.23's argument; 0.5.17 is always causal): without a tree
    mask every new token sees every token of its request."""
    _check_unsupported(is_cross_attention, sinks)
    mask_off = 0
    qlen_only = False
    if tree_mask is not None:
        ext_all = extend_seq_lens.long()
        qlen_size = int((ext_all * ext_all).sum())
        full_size = int((ext_all * seq_lens.long()).sum())
        if tree_mask.numel() not in (qlen_size, full_size):
            raise ValueError(
                f"extend_attention_cpu: tree_mask has {tree_mask.numel()} entries; expected "
                f"{qlen_size} (QLEN_ONLY) or {full_size} (FULL_MASK)"
            )
        qlen_only = tree_mask.numel() == qlen_size
    for i in range(req_pool_indices.numel()):
        total = int(seq_lens[i])
        ext = int(extend_seq_lens[i])
        prefix = total - ext
        if prefix < 0:
            raise ValueError(
                f"extend_attention_cpu: seq_len {total} < extend_len {ext} for request {i}"
            )
        start = int(extend_start_loc[i])
        row = int(req_pool_indices[i])
        slots = req_to_token[row, :prefix].long()
        k = torch.cat([k_buffer[slots], k_extend[start : start + ext]], dim=0)
        v = torch.cat([v_buffer[slots], v_extend[start : start + ext]], dim=0)
        q_pos = torch.arange(prefix, total)
        k_pos = torch.arange(total)
        if tree_mask is not None:
            width = ext if qlen_only else total
            block = tree_mask[mask_off : mask_off + ext * width].view(ext, width).bool()
            mask_off += ext * width
            visible = torch.ones(ext, total, dtype=torch.bool)
            visible[:, total - width :] = block
        elif not is_causal:
            visible = torch.ones(ext, total, dtype=torch.bool)
        else:
            visible = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)
        visible &= _window_mask(q_pos, k_pos, window)
        out = _attend(q_extend[start : start + ext], k, v, visible, sm_scale, logit_cap)
        o_extend[start : start + ext] = out.to(o_extend.dtype)


def decode_attention_cpu(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    output: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    loc: torch.Tensor,
    attn_logits: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
    logit_cap: float,
    is_cross_attention: bool,
    window: int,
    encoder_lens: Optional[torch.Tensor],
    sinks: Optional[torch.Tensor],
) -> None:
    _check_unsupported(is_cross_attention, sinks)
    if key is not None and value is not None and key.numel() > 0:
        k_cache[loc.long()] = key.view(-1, *k_cache.shape[1:]).to(k_cache.dtype)
        v_cache[loc.long()] = value.view(-1, *v_cache.shape[1:]).to(v_cache.dtype)
    for i in range(query.shape[0]):
        total = int(seq_lens[i])
        slots = req_to_token[int(req_pool_indices[i]), :total].long()
        q_pos = torch.tensor([total - 1])
        k_pos = torch.arange(total)
        visible = _window_mask(q_pos, k_pos, window)
        out = _attend(query[i : i + 1], k_cache[slots], v_cache[slots], visible, sm_scale, logit_cap)
        output[i] = out[0].to(output.dtype)


def _check_kv_scales(key_scale: float, value_scale: float) -> None:
    if key_scale != 1.0 or value_scale != 1.0:
        raise NotImplementedError("sgl_kernel stand-in: scaled (quantised) KV caches are not implemented")


def extend_attention_cpu_v0523(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, key_scale, value_scale,
                               req_to_token, req_pool_indices, seq_lens, extend_seq_lens, extend_start_loc,
                               max_len_extend, sm_scale, logit_cap, is_cross_attention, window, encoder_lens, sinks,
                               tree_mask, is_causal) -> None:
    """sglang-kernel 0.4.10's (sglang 0.5.23's) argument list: the KV scales after the buffers and
    ``is_causal`` last; otherwise :func:`extend_attention_cpu`."""
    _check_kv_scales(key_scale, value_scale)
    extend_attention_cpu(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, req_to_token, req_pool_indices,
                         seq_lens, extend_seq_lens, extend_start_loc, max_len_extend, sm_scale, logit_cap,
                         is_cross_attention, window, encoder_lens, sinks, tree_mask, is_causal)


def decode_attention_cpu_v0523(query, k_cache, v_cache, key_scale, value_scale, output, key, value, loc, attn_logits,
                               req_to_token, req_pool_indices, seq_lens, sm_scale, logit_cap, is_cross_attention,
                               window, encoder_lens, sinks) -> None:
    """sglang-kernel 0.4.10's (sglang 0.5.23's) argument list: the KV scales after the caches;
    otherwise :func:`decode_attention_cpu`."""
    _check_kv_scales(key_scale, value_scale)
    decode_attention_cpu(query, k_cache, v_cache, output, key, value, loc, attn_logits, req_to_token,
                         req_pool_indices, seq_lens, sm_scale, logit_cap, is_cross_attention, window, encoder_lens,
                         sinks)


def _sglang_release() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return "0.5.17"


RELEASE = _sglang_release()  # whose sgl_kernel argument lists the ops below take

if RELEASE == "0.5.23":
    LIB.define(
        "extend_attention_cpu(Tensor q_extend, Tensor? k_extend, Tensor? v_extend, Tensor(a!) o_extend, "
        "Tensor k_buffer, Tensor v_buffer, float key_scale, float value_scale, Tensor req_to_token, "
        "Tensor req_pool_indices, Tensor seq_lens, Tensor extend_seq_lens, Tensor extend_start_loc, "
        "int? max_len_extend, float sm_scale, float logit_cap, bool is_cross_attention, int window, "
        "Tensor? encoder_lens, Tensor? sinks, Tensor? tree_mask, bool is_causal) -> ()"
    )
    LIB.impl("extend_attention_cpu", extend_attention_cpu_v0523, "CompositeExplicitAutograd")
    LIB.define(
        "decode_attention_cpu(Tensor query, Tensor(a!) k_cache, Tensor(b!) v_cache, float key_scale, "
        "float value_scale, Tensor(c!) output, Tensor? key, Tensor? value, Tensor loc, Tensor attn_logits, "
        "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, float sm_scale, float logit_cap, "
        "bool is_cross_attention, int window, Tensor? encoder_lens, Tensor? sinks) -> ()"
    )
    LIB.impl("decode_attention_cpu", decode_attention_cpu_v0523, "CompositeExplicitAutograd")
else:
    LIB.define(
        "extend_attention_cpu(Tensor q_extend, Tensor k_extend, Tensor v_extend, Tensor(a!) o_extend, "
        "Tensor k_buffer, Tensor v_buffer, Tensor req_to_token, Tensor req_pool_indices, "
        "Tensor seq_lens, Tensor extend_seq_lens, Tensor extend_start_loc, int? max_len_extend, "
        "float sm_scale, float logit_cap, bool is_cross_attention, int window, Tensor? encoder_lens, "
        "Tensor? sinks, Tensor? tree_mask) -> ()"
    )
    LIB.impl("extend_attention_cpu", extend_attention_cpu, "CompositeExplicitAutograd")

    LIB.define(
        "decode_attention_cpu(Tensor query, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor(c!) output, "
        "Tensor? key, Tensor? value, Tensor loc, Tensor attn_logits, Tensor req_to_token, "
        "Tensor req_pool_indices, Tensor seq_lens, float sm_scale, float logit_cap, "
        "bool is_cross_attention, int window, Tensor? encoder_lens, Tensor? sinks) -> ()"
    )
    LIB.impl("decode_attention_cpu", decode_attention_cpu, "CompositeExplicitAutograd")
