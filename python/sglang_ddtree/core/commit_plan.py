"""What to do with KV slots and hidden states once a tree's path is accepted.

During the verify forward, verify position i of request b has its KV in
``verify_slots[b, i]`` (the slot sglang assigned to the token at virtual position
``prefix_len + i``). After acceptance the committed sequence must hold the path nodes at
positions ``prefix_len + t`` for t = 0..a (root first). Two ways:

- remap (page size 1): point ``req_to_token[prefix_len + t]`` at ``verify_slots[path[t]]`` and
  free every other verify slot. No KV bytes move.
- move (any page size, required for page size > 1 where slots of consecutive positions must
  stay in their pages): copy KV from ``verify_slots[path[t]]`` to ``verify_slots[t]`` for every
  t with ``path[t] != t``, keep slots ``0..a`` and free the rest. Path positions are strictly
  increasing and ``path[t] >= t``, so no source slot is overwritten before it is read even when
  moves run in order; a gather-then-scatter copy is safe regardless.

The drafter's next context needs the target hidden states of the path in order:
``hidden_gather[b, t] = b * (B+1) + path[t]`` into the verify forward's flat hidden states.

All outputs fixed shape ``[bs, L+1]`` (-1 padded) plus ``[bs, B+1]`` keep masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CommitPlan:
    # remap: slot to place at committed position prefix_len + t (t = 0..a), -1 padded
    path_slots: torch.Tensor
    # move: copy src -> dst (both -1 where no copy is needed)
    move_src: torch.Tensor
    move_dst: torch.Tensor
    # [bs, B+1] verify slots to free under each strategy
    free_after_remap: torch.Tensor
    free_after_move: torch.Tensor
    # flat row of each path node's hidden state in the verify output, -1 padded
    hidden_gather: torch.Tensor
    num_kept: torch.Tensor  # [bs] = a + 1 (or the truncated commit count)


def build_commit_plan(accepted: torch.Tensor, num_commit: torch.Tensor, verify_slots: torch.Tensor) -> CommitPlan:
    """Args:
        accepted: ``[bs, L+1]`` verify positions of the accepted path (root first), -1 padded.
        num_commit: ``[bs]`` path nodes to keep (accept_len + 1, or fewer after truncation).
        verify_slots: ``[bs, B+1]`` KV slot of each verify position.
    """
    bs, T = accepted.shape
    n = verify_slots.shape[1]
    dev = accepted.device
    t = torch.arange(T, device=dev).expand(bs, T)
    keep = (t < num_commit.unsqueeze(1)) & (accepted >= 0)
    path = torch.where(keep, accepted, -1)
    path_slots = torch.where(keep, torch.gather(verify_slots, 1, path.clamp(min=0)), -1)
    needs_move = keep & (path != t)
    move_src = torch.where(needs_move, path_slots, -1)
    dst_pos = t.clamp(max=n - 1)
    move_dst = torch.where(needs_move, torch.gather(verify_slots, 1, dst_pos), -1)

    pos = torch.arange(n, device=dev).expand(bs, n)
    used = torch.zeros(bs, n + 1, dtype=torch.bool, device=dev)
    used.scatter_(1, torch.where(keep, path, n), True)
    free_after_remap = ~used[:, :n]
    free_after_move = pos >= num_commit.unsqueeze(1)

    rows = torch.arange(bs, device=dev).view(bs, 1) * n
    hidden_gather = torch.where(keep, rows + path.clamp(min=0), -1)
    return CommitPlan(
        path_slots=path_slots, move_src=move_src, move_dst=move_dst,
        free_after_remap=free_after_remap, free_after_move=free_after_move,
        hidden_gather=hidden_gather, num_kept=keep.sum(-1),
    )


def pages_to_free(prefix_lens: torch.Tensor, num_kept: torch.Tensor, num_verify: int, page_size: int):
    """Page-granular freeing after a move commit (page size > 1).

    Verify positions occupy virtual positions ``prefix_len .. prefix_len + num_verify - 1``.
    After keeping ``num_kept`` of them, whole pages entirely beyond the last kept position can
    be freed. Returns ``[bs]`` first virtual position whose page may be freed (a page boundary)
    and ``[bs]`` one past the last verify position; pages in between go back to the allocator.
    """
    end_kept = prefix_lens.long() + num_kept.long()
    first_free = torch.div(end_kept + page_size - 1, page_size, rounding_mode="floor") * page_size
    end = prefix_lens.long() + num_verify
    return first_free, end
