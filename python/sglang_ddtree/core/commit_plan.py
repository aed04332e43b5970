"""The KV commit of an accepted path, and what the next step is built from.

During the verify, position ``i`` of request ``b`` has its KV in ``window[b, i]``: the slot of the
token at sequence position ``prefix_len + i``. After acceptance the committed sequence must hold
the path's nodes at ``prefix_len + t`` for ``t = 0..a`` (root first). The window is permuted so
the path comes first: ``new_window[b, t] = window[b, path[t]]`` for ``t <= a``, then the slots of
every other position in increasing position order. Writing ``new_window`` into the request's
``req_to_token`` row at ``prefix_len .. prefix_len + W - 1`` commits the path without moving a
KV byte; no slot is lost or duplicated (the slots past the path stay in the request's reserved
window and the next step's verify overwrites them). The order of every entry matters: the
radix cache stores ``req_to_token`` by position.

With pages of more than one token a slot's position inside its page is fixed, so the window
cannot be permuted (``move_kv``): it stays as it is (``new_window = window``) and the path's KV
moves instead, ``move_src[b, t] = window[b, path[t]]`` to ``move_dst[b, t] = window[b, t]``
(``src == dst`` where nothing moves, and past the path). Sources and destinations can overlap
(a path node's slot can be the destination of an earlier path position), so the caller moves
through slots outside the window.

The drafter's next context is the target's hidden state of each path node, in path order: rows
``path_index[b, t]`` of the verify's ``[bs, W, H]`` hidden states, written to ``path_slots``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .accept import Acceptance


@dataclass
class CommitPlan:
    """``new_window [bs, W]`` slots, path first; ``path_index [bs, P]`` verify positions of the
    path (root first, clamped to 0 where the path is shorter; rows past ``commit_lens`` are
    padding); ``path_slots [bs, P]`` = ``new_window[:, :P]``; ``commit_lens [bs]`` int32 tokens
    committed (accepted drafts + the bonus); ``bonus [bs]`` the next root; ``out_tokens [bs, W]``
    int64 the committed tokens (path tokens then the bonus), 0 after them."""

    new_window: torch.Tensor
    path_index: torch.Tensor
    path_slots: torch.Tensor
    commit_lens: torch.Tensor
    bonus: torch.Tensor
    out_tokens: torch.Tensor
    move_src: Optional[torch.Tensor] = None  # [bs, P] slots whose KV moves (move_kv), else None
    move_dst: Optional[torch.Tensor] = None  # [bs, P] = window[:, :P]


def path_first_permutation(accepted: torch.Tensor, width: int) -> torch.Tensor:
    """``[bs, width]`` permutation of window positions: the accepted path (``accepted [bs, P]``,
    root first, -1 padded, ``P <= width``), then every other position in increasing order."""
    bs, P = accepted.shape
    dev = accepted.device
    # Sort rank: path index t (< P) for path positions, P + position for the rest.
    rank = torch.arange(width, device=dev).expand(bs, width) + P
    rank = torch.cat([rank, torch.zeros(bs, 1, dtype=rank.dtype, device=dev)], 1)  # sink column
    on = accepted >= 0
    t = torch.arange(P, device=dev).expand(bs, P)
    rank.scatter_(1, torch.where(on, accepted, width), torch.where(on, t, 0))
    return torch.argsort(rank[:, :width], dim=1)


def build_commit_plan(acc: Acceptance, window: torch.Tensor, move_kv: bool = False) -> CommitPlan:
    """The plan for ``acc`` (from ``accept.tree_walk``) over the step's KV ``window [bs, W]``:
    the window permuted path first, or with ``move_kv`` the window kept and the path's KV moves.
    Fixed shapes, no host synchronisation."""
    bs, W = window.shape
    P = acc.accepted.shape[1]
    move_src = move_dst = None
    if move_kv:
        new_window = window
        move_dst = window[:, :P].contiguous()
        on = acc.accepted >= 0
        move_src = torch.where(on, window.gather(1, acc.accepted.clamp(min=0)), move_dst)
    else:
        new_window = window.gather(1, path_first_permutation(acc.accepted, W))
    bonus = acc.new_tokens.gather(1, acc.accept_len.unsqueeze(1)).squeeze(1)
    out_tokens = torch.zeros((bs, W), dtype=torch.int64, device=window.device)
    out_tokens[:, : acc.new_tokens.shape[1]] = acc.new_tokens.clamp(min=0)
    return CommitPlan(new_window=new_window, path_index=acc.accepted.clamp(min=0),
                      path_slots=new_window[:, :P].contiguous(),
                      commit_lens=(acc.accept_len + 1).to(torch.int32), bonus=bonus, out_tokens=out_tokens,
                      move_src=move_src, move_dst=move_dst)


def build_commit_plan_reference(accepted, accept_len, new_tokens, window, move_kv: bool = False) -> dict:
    """Per-request loops over python lists: the same fields as :func:`build_commit_plan`."""
    out = {k: [] for k in ("new_window", "path_index", "commit_lens", "bonus", "out_tokens", "move_src", "move_dst")}
    W = len(window[0])
    for acc_row, a, new, win in zip(accepted, accept_len, new_tokens, window):
        path = [p for p in acc_row if p >= 0]
        assert len(path) == a + 1
        rest = [i for i in range(W) if i not in path]
        if move_kv:
            out["new_window"].append(list(win))
            out["move_dst"].append([win[t] for t in range(len(acc_row))])
            out["move_src"].append([win[p] if p >= 0 else win[t] for t, p in enumerate(acc_row)])
        else:
            out["new_window"].append([win[i] for i in path + rest])
        out["path_index"].append([max(p, 0) for p in acc_row])
        out["commit_lens"].append(a + 1)
        out["bonus"].append(new[a])
        out["out_tokens"].append([max(x, 0) for x in new] + [0] * (W - len(new)))
    return out
