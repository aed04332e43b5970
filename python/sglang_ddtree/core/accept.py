"""Tree-walk acceptance.

Walk (per request): start at the root; while the target's token at the current node equals
the token of one of its children, move to that child. At T = 0 the target's token is the
argmax of its logits at the node; at T > 0 it is one sample from the target's distribution at
the node (drawn for every node before the walk), which keeps the output distribution exactly
the target's. Siblings carry distinct tokens (distinct top-K ids of one depth), so at most one
child matches and the walk is unique.

Vectorised form: node i >= 1 "matches" if ``token[i] == target[parent[i]]``; it is on the
accepted path iff it and all its non-root ancestors match. The accepted nodes, sorted by
depth, are the path; the bonus token is ``target`` at its last node.

Output, fixed shape (``L`` = max depth):
    accepted ``[bs, L+1]`` verify positions of the path, root first, -1 padded;
    accept_len ``[bs]`` accepted draft nodes (path length - 1);
    new_tokens ``[bs, L+1]`` tokens this step commits: path tokens (depth 1..) then the bonus;
    num_new ``[bs]`` = accept_len + 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class Acceptance:
    accepted: torch.Tensor
    accept_len: torch.Tensor
    new_tokens: torch.Tensor
    num_new: torch.Tensor


def filtered_probs(logits: torch.Tensor, temperature: torch.Tensor, top_k: Optional[torch.Tensor] = None,
                   top_p: Optional[torch.Tensor] = None, min_p: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The target's sampling distribution per row: ``logits [bs, n, V]`` -> probs ``[bs, n, V]``.

    ``softmax(logits / T)``, then (per request, ``[bs]`` each, None = off) the filters of
    sglang's sampler, on probabilities sorted in decreasing order: keep the ``top_k`` likeliest;
    keep a token while the mass *before* it is at most ``top_p``; keep tokens with at least
    ``min_p`` times the top probability; renormalise. Ties at a cut follow the sort order.
    """
    bs, n, v = logits.shape
    probs = torch.softmax(logits.float() / temperature.view(bs, 1, 1).float().clamp(min=1e-6), dim=-1)
    if top_k is None and top_p is None and min_p is None:
        return probs
    p_sorted, order = probs.sort(dim=-1, descending=True)
    keep = torch.ones_like(p_sorted, dtype=torch.bool)
    if top_k is not None:
        rank = torch.arange(v, device=logits.device)
        keep &= rank.view(1, 1, v) < top_k.view(bs, 1, 1).clamp(min=1)
    if top_p is not None:
        before = p_sorted.cumsum(-1) - p_sorted
        keep &= before <= top_p.view(bs, 1, 1).float()
    if min_p is not None:
        keep &= p_sorted >= min_p.view(bs, 1, 1).float() * p_sorted[..., :1]
    keep[..., 0] = True  # the likeliest token always survives
    p_sorted = torch.where(keep, p_sorted, 0.0)
    out = torch.zeros_like(probs).scatter_(-1, order, p_sorted)
    return out / out.sum(-1, keepdim=True)


def target_tokens(logits: torch.Tensor, temperature: torch.Tensor, generator: Optional[torch.Generator] = None,
                  top_k: Optional[torch.Tensor] = None, top_p: Optional[torch.Tensor] = None,
                  min_p: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The target's token at every verify position: ``logits [bs, n, V]`` -> ``[bs, n]``.

    Rows with ``temperature[b] == 0`` take the argmax; others draw one independent sample per
    node from the target's sampling distribution (:func:`filtered_probs`), which is what makes
    the sampled walk lossless: the token emitted after any accepted prefix is a draw from the
    target's distribution there.
    """
    bs, n, v = logits.shape
    greedy = logits.argmax(-1)
    probs = filtered_probs(logits, temperature, top_k, top_p, min_p)
    # Exponential-race sampling: argmax(p / E) with E ~ Exp(1) is a draw from p; it needs no
    # host sync (torch.multinomial does), so it can sit in a CUDA graph.
    e = torch.empty_like(probs).exponential_(1.0, generator=generator)
    sampled = (probs / e).argmax(-1)
    return torch.where(temperature.view(bs, 1) > 0, sampled, greedy)


def tree_walk(
    tokens: torch.Tensor,
    parent: torch.Tensor,
    depth: torch.Tensor,
    target: torch.Tensor,
    max_depth: int,
) -> Acceptance:
    """Accept along the tree. All inputs ``[bs, n]``; ``target`` holds the target's argmax
    (T = 0) or its per-node sample (T > 0) at every verify position. O(L * n) work."""
    bs, n = tokens.shape
    dev = tokens.device
    parent_target = torch.gather(target, 1, parent.clamp(min=0))
    match = (tokens == parent_target) & (parent >= 0)
    match[:, 0] = True  # the root is always on the path
    # On path iff it and its parent's chain match: propagate down one level per step.
    on_path = match
    for _ in range(max_depth):
        on_path = match & torch.gather(on_path, 1, parent.clamp(min=0))
    # Depth slots 0..L: at most one node per depth is on the path.
    slot = torch.where(on_path, depth, max_depth + 1)
    accepted = torch.full((bs, max_depth + 2), -1, dtype=torch.int64, device=dev)
    idx = torch.arange(n, device=dev).expand(bs, n)
    accepted.scatter_(1, slot, idx)
    accepted = accepted[:, : max_depth + 1]
    accept_len = on_path.sum(-1) - 1
    last = torch.gather(accepted, 1, accept_len.unsqueeze(1)).squeeze(1)
    bonus = torch.gather(target, 1, last.unsqueeze(1)).squeeze(1)
    # New tokens: path tokens at depth 1..a, then the bonus at slot a.
    path_tokens = torch.gather(tokens, 1, accepted.clamp(min=0))
    new_tokens = torch.cat([path_tokens[:, 1:], torch.zeros(bs, 1, dtype=tokens.dtype, device=dev)], 1)
    pos = torch.arange(max_depth + 1, device=dev).expand(bs, -1)
    new_tokens = torch.where(pos < accept_len.unsqueeze(1), new_tokens, -1)
    new_tokens.scatter_(1, accept_len.unsqueeze(1), bonus.unsqueeze(1).to(new_tokens.dtype))
    return Acceptance(accepted=accepted, accept_len=accept_len, new_tokens=new_tokens, num_new=accept_len + 1)


def tree_walk_reference(tokens, parent, target):
    """Per-request loop: follow the child whose token equals the target's token."""
    bs, n = tokens.shape
    paths = []
    for b in range(bs):
        path = [0]
        while True:
            cur = path[-1]
            kids = [i for i in range(n) if int(parent[b, i]) == cur and int(tokens[b, i]) == int(target[b, cur])]
            if not kids:
                break
            assert len(kids) == 1, "siblings must carry distinct tokens"
            path.append(kids[0])
        paths.append(path)
    return paths
