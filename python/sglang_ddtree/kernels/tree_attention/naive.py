"""Plain-torch reference of the tree-verify attention (:mod:`.splitkv`), in float64.

Per request ``b`` with ``n = qo_indptr[b+1] - qo_indptr[b]`` window tokens and
``P = kv_indptr[b+1] - kv_indptr[b]`` committed tokens, query ``i`` of the window attends to every
committed token (slots ``kv_indices[kv_indptr[b] : kv_indptr[b+1]]`` of ``k_buffer`` / ``v_buffer``)
and to window token ``j`` where the mask allows it: ``custom_mask[mask_indptr[b] + i * (P + n) + P + j]``
(sglang's FULL mask layout; the committed columns of the mask are not read).
"""

from __future__ import annotations

import torch


def tree_attention_reference(q: torch.Tensor, k_tree: torch.Tensor, v_tree: torch.Tensor, k_buffer: torch.Tensor,
                             v_buffer: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
                             kv_indices: torch.Tensor, custom_mask: torch.Tensor, mask_indptr: torch.Tensor,
                             sm_scale: float) -> torch.Tensor:
    """``q`` ``[T, Hq, D]``, ``k_tree`` / ``v_tree`` ``[T, Hkv, D]`` (the window's own keys and
    values, rows as ``q``), ``k_buffer`` / ``v_buffer`` ``[slots, Hkv, D]``; ``Hq`` a multiple of
    ``Hkv``. Returns ``[T, Hq, D]`` float64. A window row with no allowed key at all (no committed
    token and a mask row of zeros) raises ValueError: its softmax is undefined."""
    T, Hq, D = q.shape
    group = Hq // k_tree.shape[1]
    out = torch.zeros(T, Hq, D, dtype=torch.float64, device=q.device)
    qo, kvp, mp = qo_indptr.tolist(), kv_indptr.tolist(), mask_indptr.tolist()
    for b in range(len(qo) - 1):
        q0, n = qo[b], qo[b + 1] - qo[b]
        P = kvp[b + 1] - kvp[b]
        if n == 0:
            continue
        slots = kv_indices[kvp[b]: kvp[b + 1]].long()
        keys = torch.cat([k_buffer[slots], k_tree[q0: q0 + n]]).double()    # [P + n, Hkv, D]
        vals = torch.cat([v_buffer[slots], v_tree[q0: q0 + n]]).double()
        rows = custom_mask[mp[b]: mp[b] + n * (P + n)].reshape(n, P + n).bool()
        allow = torch.cat([torch.ones(n, P, dtype=torch.bool, device=q.device), rows[:, P:]], dim=1)
        if not allow.any(dim=1).all():
            raise ValueError(f"request {b}: a window row attends to nothing")
        keys = keys.repeat_interleave(group, dim=1)                          # [P + n, Hq, D]
        vals = vals.repeat_interleave(group, dim=1)
        s = torch.einsum("ihd,jhd->hij", q[q0: q0 + n].double(), keys) * sm_scale
        s = s.masked_fill(~allow.unsqueeze(0), float("-inf"))
        out[q0: q0 + n] = torch.einsum("hij,jhd->ihd", s.softmax(-1), vals)
    return out
