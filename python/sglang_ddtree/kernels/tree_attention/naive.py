"""Plain-torch reference of the tree-verify attention (:mod:`.splitkv`), in float64.

Per request ``b`` with ``n = qo_indptr[b+1] - qo_indptr[b]`` window tokens and
``P = kv_indptr[b+1] - kv_indptr[b]`` committed tokens, query ``i`` of the window attends to every
committed token (slots ``kv_indices[kv_indptr[b] : kv_indptr[b+1]]`` of ``k_buffer`` / ``v_buffer``)
and to window token ``j`` where the mask allows it: ``custom_mask[mask_indptr[b] + i * (P + n) + P + j]``
(sglang's FULL mask layout; the committed columns of the mask are not read). Without a mask
(``custom_mask=None``) window token ``j`` is visible to query ``i`` when ``j <= i`` (``causal``) or
always. A sliding window ``W > 0`` further hides committed token ``c`` (its index in the request's
list) from query ``i`` unless ``P + i <= c + W``, and window token ``j`` unless ``i <= j + W``
(sglang's ``extend_attention_fwd`` rule).
"""

from __future__ import annotations

import torch


def tree_attention_reference(q: torch.Tensor, k_tree: torch.Tensor, v_tree: torch.Tensor, k_buffer: torch.Tensor,
                             v_buffer: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
                             kv_indices: torch.Tensor, custom_mask: torch.Tensor, mask_indptr: torch.Tensor,
                             sm_scale: float, causal: bool = True, sliding_window: int = -1) -> torch.Tensor:
    """``q`` ``[T, Hq, D]``, ``k_tree`` / ``v_tree`` ``[T, Hkv, D]`` (the window's own keys and
    values, rows as ``q``), ``k_buffer`` / ``v_buffer`` ``[slots, Hkv, D]``; ``Hq`` a multiple of
    ``Hkv``. Returns ``[T, Hq, D]`` float64. A window row with no allowed key at all (no committed
    token and a mask row of zeros) raises ValueError: its softmax is undefined."""
    if custom_mask is not None and not causal:
        raise ValueError("a custom mask is defined for causal=True only")
    T, Hq, D = q.shape
    group = Hq // k_tree.shape[1]
    out = torch.zeros(T, Hq, D, dtype=torch.float64, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    mp = mask_indptr.tolist() if custom_mask is not None else None
    for b in range(len(qo) - 1):
        q0, n = qo[b], qo[b + 1] - qo[b]
        P = kvp[b + 1] - kvp[b]
        if n == 0:
            continue
        slots = kv_indices[kvp[b]: kvp[b + 1]].long()
        keys = torch.cat([k_buffer[slots], k_tree[q0: q0 + n]]).double()    # [P + n, Hkv, D]
        vals = torch.cat([v_buffer[slots], v_tree[q0: q0 + n]]).double()
        i = torch.arange(n, device=q.device)[:, None]
        if custom_mask is not None:
            own = custom_mask[mp[b]: mp[b] + n * (P + n)].reshape(n, P + n).bool()[:, P:]
        elif causal:
            own = i >= torch.arange(n, device=q.device)[None, :]
        else:
            own = torch.ones(n, n, dtype=torch.bool, device=q.device)
        ctx = torch.ones(n, P, dtype=torch.bool, device=q.device)
        if sliding_window is not None and sliding_window > 0:
            ctx = ctx & (P + i <= torch.arange(P, device=q.device)[None, :] + sliding_window)
            own = own & (i <= torch.arange(n, device=q.device)[None, :] + sliding_window)
        allow = torch.cat([ctx, own], dim=1)
        if not allow.any(dim=1).all():
            raise ValueError(f"request {b}: a window row attends to nothing")
        keys = keys.repeat_interleave(group, dim=1)                          # [P + n, Hq, D]
        vals = vals.repeat_interleave(group, dim=1)
        s = torch.einsum("ihd,jhd->hij", q[q0: q0 + n].double(), keys) * sm_scale
        s = s.masked_fill(~allow.unsqueeze(0), float("-inf"))
        out[q0: q0 + n] = torch.einsum("hij,jhd->ihd", s.softmax(-1), vals)
    return out
