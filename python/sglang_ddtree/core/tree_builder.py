"""Best-first DDTree draft trees under a node budget.

Input per request: per-depth log-probabilities ``lp[d, r]`` (depth d = 1..L stored at index
d-1, rank r sorted best first) and their token ids. A node is a path of ranks
``(r_1, ..., r_d)``; its score is ``lp[1, r_1] + ... + lp[d, r_d]`` accumulated in fp32 in that
order (``parent_score + lp[d, r]``). The tree is the ``B`` best nodes; the root (the bonus
token) is not counted.

Tie rule (documented, deterministic, the same in both implementations): nodes are ordered by
the key ``(-score, depth, parent's order, rank)``, where "parent's order" is the parent's
position in this same order (the root counts as 0). The B smallest keys are the tree, and the
output lists them in key order. Every child and next sibling has a strictly larger key than
its generator, so best-first popping yields exactly this order and the set is prefix-closed.

Optional caps: ``max_siblings`` (ranks r < max_siblings only) and ``max_depth``.

Output (both implementations), fixed shape ``[bs, B]`` in key order, padded with -1 where a
request has fewer than B nodes available (tiny K and L):
    depth  (1..L), parent (node index, -1 = root), rank, token, score (fp32, -inf on padding).
Node i of the output is verify position i + 1 (position 0 is the root).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import torch

from .order_keys import bits_for, desc_value_asc_tiebreak


@dataclass
class DraftTree:
    """A batch of draft trees, ``[bs, B]`` each (see module docstring)."""

    depth: torch.Tensor
    parent: torch.Tensor
    rank: torch.Tensor
    token: torch.Tensor
    score: torch.Tensor

    @property
    def num_nodes(self) -> torch.Tensor:
        """``[bs]`` valid (non-padding) nodes per request."""
        return (self.depth > 0).sum(dim=-1)


def _caps(L: int, K: int, max_siblings: Optional[int], max_depth: Optional[int]):
    k_eff = K if max_siblings is None else max(0, min(K, max_siblings))
    l_eff = L if max_depth is None else max(0, min(L, max_depth))
    return l_eff, k_eff


def build_tree_reference(
    lp: torch.Tensor,
    ids: torch.Tensor,
    budget: int,
    max_siblings: Optional[int] = None,
    max_depth: Optional[int] = None,
) -> DraftTree:
    """Readable per-request heap implementation. ``lp``/``ids``: ``[bs, L, K]``."""
    bs, L, K = lp.shape
    l_eff, k_eff = _caps(L, K, max_siblings, max_depth)
    lp_np = lp.detach().cpu().to(torch.float32).numpy()
    ids_np = ids.detach().cpu().numpy()
    out = {n: np.full((bs, budget), -1, dtype=np.int64) for n in ("depth", "parent", "rank", "token")}
    score = np.full((bs, budget), -np.inf, dtype=np.float32)
    for b in range(bs):
        nodes = _best_first(lp_np[b], budget, l_eff, k_eff)
        for i, (s, d, parent, r) in enumerate(nodes):
            out["depth"][b, i] = d
            out["parent"][b, i] = parent
            out["rank"][b, i] = r
            out["token"][b, i] = ids_np[b, d - 1, r]
            score[b, i] = s
    as_t = {k: torch.from_numpy(v) for k, v in out.items()}
    return DraftTree(score=torch.from_numpy(score), **as_t)


def _best_first(lp: np.ndarray, budget: int, L: int, K: int) -> List[tuple]:
    """Pop order of (score, depth, parent_node_index, rank); parent -1 is the root."""
    if L == 0 or K == 0 or budget == 0:
        return []
    root_score = np.float32(0.0)
    # Heap items: (-score, depth, parent_order, rank, parent_score, parent_index)
    # parent_order is the parent's pop position + 1 (root = 0); it equals the tie-break field.
    heap = [(-(root_score + lp[0, 0]), 1, 0, 0, root_score, -1)]
    popped = []
    while heap and len(popped) < budget:
        neg, d, porder, r, pscore, pidx = heapq.heappop(heap)
        s = np.float32(-neg)
        me = len(popped)
        popped.append((s, d, pidx, r))
        if r + 1 < K:  # next sibling: same parent, next rank
            heapq.heappush(heap, (-(pscore + lp[d - 1, r + 1]), d, porder, r + 1, pscore, pidx))
        if d < L:  # first child
            heapq.heappush(heap, (-(s + lp[d, 0]), d + 1, me + 1, 0, s, me))
    return popped


def build_tree(
    lp: torch.Tensor,
    ids: torch.Tensor,
    budget: int,
    max_siblings: Optional[int] = None,
    max_depth: Optional[int] = None,
) -> DraftTree:
    """Batched, fixed-shape, host-sync-free implementation (CUDA-graph capturable).

    Depth by depth, keep the ``B`` best depth-d nodes whose parents are among the kept
    depth-(d-1) nodes; by monotonicity (a child never outranks its parent) these are the B
    best depth-d nodes overall. The tree is then the B best of the ``L * B`` kept nodes.

    Args:
        lp: ``[bs, L, K]`` fp32 log-probs, sorted descending along K.
        ids: ``[bs, L, K]`` token ids.
    """
    bs, L, K = lp.shape
    dev = lp.device
    l_eff, k_eff = _caps(L, K, max_siblings, max_depth)
    B = budget
    if l_eff == 0 or k_eff == 0 or B == 0:
        return _empty(bs, B, dev)
    lp = lp.float()[:, :l_eff, :k_eff]
    ids = ids[:, :l_eff, :k_eff]
    width = min(B, k_eff)

    pair_bits = bits_for(B) + bits_for(k_eff)
    # Depth 1: children of the root, in rank order.
    beam_score = torch.full((bs, B), float("-inf"), device=dev)
    beam_score[:, :width] = lp[:, 0, :width]
    beam_rank = torch.full((bs, B), -1, dtype=torch.int64, device=dev)
    beam_rank[:, :width] = torch.arange(width, device=dev)
    beam_parent = torch.full((bs, B), -1, dtype=torch.int64, device=dev)  # position in prev beam
    scores, ranks, parents = [beam_score], [beam_rank], [beam_parent]
    j_idx = torch.arange(B, device=dev).view(1, B, 1)
    r_idx = torch.arange(k_eff, device=dev).view(1, 1, k_eff)
    tie = (j_idx * (1 << bits_for(k_eff)) + r_idx).expand(bs, B, k_eff).reshape(bs, B * k_eff)
    for d in range(1, l_eff):
        cand = beam_score.unsqueeze(-1) + lp[:, d].unsqueeze(1)  # [bs, B, K]
        cand = cand.masked_fill(torch.isneginf(beam_score).unsqueeze(-1), float("-inf"))
        cand = cand.reshape(bs, B * k_eff)
        keys = desc_value_asc_tiebreak(cand, tie, pair_bits)
        top = torch.topk(keys, B, dim=-1, largest=True, sorted=True).indices  # [bs, B]
        beam_score = torch.gather(cand, 1, top)
        beam_parent = torch.div(top, k_eff, rounding_mode="floor")
        beam_rank = torch.remainder(top, k_eff)
        valid = ~torch.isneginf(beam_score)
        beam_parent = torch.where(valid, beam_parent, -1)
        beam_rank = torch.where(valid, beam_rank, -1)
        scores.append(beam_score)
        ranks.append(beam_rank)
        parents.append(beam_parent)

    all_score = torch.stack(scores, 1)  # [bs, L', B]
    all_rank = torch.stack(ranks, 1)
    all_parent = torch.stack(parents, 1)
    depth_bits, pos_bits = bits_for(l_eff), bits_for(B)
    d_idx = torch.arange(l_eff, device=dev).view(1, l_eff, 1)
    p_idx = torch.arange(B, device=dev).view(1, 1, B)
    tie2 = (d_idx * (1 << pos_bits) + p_idx).expand(bs, l_eff, B).reshape(bs, -1)
    flat_score = all_score.reshape(bs, -1)
    keys = desc_value_asc_tiebreak(flat_score, tie2, depth_bits + pos_bits)
    sel = torch.topk(keys, B, dim=-1, largest=True, sorted=True).indices  # [bs, B]
    score = torch.gather(flat_score, 1, sel)
    valid = ~torch.isneginf(score)
    depth0 = torch.div(sel, B, rounding_mode="floor")  # 0-based depth
    rank = torch.gather(all_rank.reshape(bs, -1), 1, sel)
    parent_pos = torch.gather(all_parent.reshape(bs, -1), 1, sel)

    # Output index of every kept (depth, pos); parents are (depth-1, parent_pos).
    out_index = torch.full((bs, l_eff * B), -1, dtype=torch.int64, device=dev)
    out_index.scatter_(1, sel, torch.arange(B, device=dev).expand(bs, B))
    parent_flat = (depth0 - 1).clamp(min=0) * B + parent_pos.clamp(min=0)
    parent = torch.where(depth0 > 0, torch.gather(out_index, 1, parent_flat), -1)

    token = torch.gather(ids.reshape(bs, -1), 1, (depth0 * k_eff + rank.clamp(min=0)))
    depth = depth0 + 1
    pad = ~valid
    return DraftTree(
        depth=depth.masked_fill(pad, -1),
        parent=parent.masked_fill(pad, -1),
        rank=rank.masked_fill(pad, -1),
        token=token.masked_fill(pad, -1),
        score=score,
    )


def _empty(bs: int, B: int, dev) -> DraftTree:
    neg = torch.full((bs, B), -1, dtype=torch.int64, device=dev)
    return DraftTree(
        depth=neg, parent=neg.clone(), rank=neg.clone(), token=neg.clone(),
        score=torch.full((bs, B), float("-inf"), device=dev),
    )


def pad_columns(x: torch.Tensor, extra: int, fill) -> torch.Tensor:
    """``x [bs, n]`` with ``extra`` columns of ``fill`` appended: ``[bs, n + extra]``."""
    return torch.cat([x, torch.full((x.shape[0], extra), fill, dtype=x.dtype, device=x.device)], 1)


def pad_tree(tree: DraftTree, nodes: int) -> DraftTree:
    """Pad a ``[bs, B]`` tree with padding nodes to ``[bs, nodes]``."""
    b = tree.depth.shape[1]
    if nodes == b:
        return tree
    extra = nodes - b

    def cat(x, fill):
        return pad_columns(x, extra, fill)

    return DraftTree(
        depth=cat(tree.depth, -1), parent=cat(tree.parent, -1), rank=cat(tree.rank, -1),
        token=cat(tree.token, -1), score=cat(tree.score, float("-inf")),
    )
