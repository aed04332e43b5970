"""Verify-forward layout of a batch of draft trees: ``B + 1`` positions per request.

Position 0 is the root (the bonus token from the previous step); position i >= 1 is node
i - 1 of the :class:`~sglang_ddtree.core.tree_builder.DraftTree`. Padding positions (a request
with fewer than B nodes) get token 0, their own position only in the ancestor mask, no parent
and no links, so they never match in acceptance and attend only to the prefix and themselves.

Produced, all fixed-shape and host-sync free:
    tokens ``[bs, B+1]``, depth ``[bs, B+1]`` (root 0), positions ``[bs, B+1]`` (prefix + depth),
    parent ``[bs, B+1]`` (-1 for the root and padding),
    ancestor mask ``[bs, B+1, B+1]`` bool (row = query, True = visible; self included),
    packed mask ``[bs, B+1, ceil((B+1)/32)]`` int32 (bit j of word w = column 32w + j),
    first_child / next_sibling ``[bs, B+1]`` (-1 = none; children in increasing position),
    retrieve_index ``[bs, B+1]`` (flat position of each node in the batch: b * (B+1) + i).
These are exactly what sglang's tree verify consumes (``custom_mask`` in QLEN_ONLY layout,
``retrieve_next_token`` / ``retrieve_next_sibling`` / ``retrieve_index``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .tree_builder import DraftTree, pad_columns


@dataclass
class VerifyLayout:
    tokens: torch.Tensor
    depth: torch.Tensor
    positions: torch.Tensor
    parent: torch.Tensor
    ancestor_mask: torch.Tensor
    first_child: torch.Tensor
    next_sibling: torch.Tensor
    retrieve_index: torch.Tensor

    @property
    def num_positions(self) -> int:
        return self.tokens.shape[1]

    def qlen_only_mask(self) -> torch.Tensor:
        """Flat ``[bs * (B+1) * (B+1)]`` bool mask in sglang's QLEN_ONLY layout."""
        return self.ancestor_mask.reshape(-1)

    def full_mask(self, prefix_lens: torch.Tensor, total_prefix: int) -> torch.Tensor:
        """sglang's FULL_MASK layout: per request ``[B+1, prefix_i + B+1]``, prefix visible.

        ``total_prefix`` must equal ``prefix_lens.sum()``; the caller knows it on the host
        (sglang's ``seq_lens_sum``), which keeps this function sync-free.
        """
        bs, n = self.tokens.shape
        out = torch.ones(total_prefix * n + bs * n * n, dtype=torch.bool, device=self.tokens.device)
        row_len = prefix_lens.long() + n  # [bs]
        starts = torch.cumsum(row_len * n, 0) - row_len * n  # [bs]
        r = torch.arange(n, device=out.device).view(1, n, 1)
        c = torch.arange(n, device=out.device).view(1, 1, n)
        idx = starts.view(bs, 1, 1) + r * row_len.view(bs, 1, 1) + prefix_lens.long().view(bs, 1, 1) + c
        out[idx.reshape(-1)] = self.ancestor_mask.reshape(-1)
        return out

    def packed_mask(self) -> torch.Tensor:
        """``[bs, B+1, ceil((B+1)/32)]`` int32 bit-packed ancestor mask."""
        bs, n, _ = self.ancestor_mask.shape
        words = (n + 31) // 32
        padded = torch.zeros(bs, n, words * 32, dtype=torch.int64, device=self.tokens.device)
        padded[..., :n] = self.ancestor_mask.long()
        weights = torch.bitwise_left_shift(torch.ones(32, dtype=torch.int64, device=padded.device), torch.arange(32, device=padded.device))
        packed = (padded.view(bs, n, words, 32) * weights).sum(-1)
        # Reinterpret the low 32 bits as int32 (bit 31 becomes the sign bit).
        return torch.where(packed >= (1 << 31), packed - (1 << 32), packed).to(torch.int32)


def build_verify_layout(
    tree: DraftTree, root_tokens: torch.Tensor, prefix_lens: torch.Tensor, max_depth: int
) -> VerifyLayout:
    """Layout for a batch of trees.

    Args:
        tree: ``[bs, B]`` draft trees.
        root_tokens: ``[bs]`` bonus tokens (verify position 0).
        prefix_lens: ``[bs]`` committed tokens before the root (the root sits at this position).
        max_depth: L, the deepest a node can be (bounds the ancestor walk).
    """
    bs, B = tree.depth.shape
    n = B + 1
    dev = tree.depth.device
    valid = tree.depth > 0
    tokens = torch.cat([root_tokens.view(bs, 1).long(), tree.token.clamp(min=0)], 1)
    depth = torch.cat([torch.zeros(bs, 1, dtype=torch.int64, device=dev), tree.depth.clamp(min=0)], 1)
    positions = prefix_lens.view(bs, 1).long() + depth
    # Node parents in verify positions: root (-1 in the tree) -> 0; padding -> -1.
    parent_nodes = torch.where(tree.parent >= 0, tree.parent + 1, 0)
    parent_nodes = torch.where(valid, parent_nodes, -1)
    parent = torch.cat([torch.full((bs, 1), -1, dtype=torch.int64, device=dev), parent_nodes], 1)

    ancestor_mask = _ancestor_mask(parent, max_depth)
    first_child, next_sibling = _child_links(parent)
    retrieve_index = torch.arange(bs * n, device=dev).view(bs, n)
    return VerifyLayout(
        tokens=tokens, depth=depth, positions=positions, parent=parent,
        ancestor_mask=ancestor_mask, first_child=first_child, next_sibling=next_sibling,
        retrieve_index=retrieve_index,
    )


def pad_layout(layout: VerifyLayout, n: int) -> VerifyLayout:
    """``layout`` (``[bs, m]`` positions) padded to ``[bs, n]`` with padding positions, equal to the
    layout of the tree padded first (``build_verify_layout(pad_tree(tree, n - 1), ...)``). For the
    CUDA tree builder, which lays out exactly ``budget + 1`` positions, under a verify width padded
    up to the draft block."""
    bs, m = layout.tokens.shape
    if n == m:
        return layout
    if n < m:
        raise ValueError(f"pad_layout: cannot pad {m} positions down to {n}")
    extra = n - m

    def cat(x, fill):
        return pad_columns(x, extra, fill)

    mask = torch.zeros(bs, n, n, dtype=layout.ancestor_mask.dtype, device=layout.ancestor_mask.device)
    mask[:, :m, :m] = layout.ancestor_mask
    # A padding position sees itself (and the prefix): the diagonal of the padded block, written
    # through a view (a tensor-indexed assignment synchronises with the host).
    mask[:, m:, m:].diagonal(dim1=1, dim2=2).fill_(True)
    return VerifyLayout(
        tokens=cat(layout.tokens, 0), depth=cat(layout.depth, 0),
        positions=torch.cat([layout.positions, layout.positions[:, :1].expand(bs, extra)], 1),
        parent=cat(layout.parent, -1), ancestor_mask=mask,
        first_child=cat(layout.first_child, -1), next_sibling=cat(layout.next_sibling, -1),
        retrieve_index=torch.arange(bs * n, device=layout.tokens.device).view(bs, n),
    )


def _ancestor_mask(parent: torch.Tensor, max_depth: int) -> torch.Tensor:
    """``[bs, n, n]``: row i marks i and every ancestor of i (walk up ``max_depth`` times)."""
    bs, n = parent.shape
    dev = parent.device
    # Column n is a sink for "no more ancestors", so every step is one fixed-shape scatter.
    mask = torch.zeros(bs, n, n + 1, dtype=torch.bool, device=dev)
    cur = torch.arange(n, device=dev).expand(bs, n).clone()
    for _ in range(max_depth + 1):
        ok = cur >= 0
        mask.scatter_(2, torch.where(ok, cur, n).unsqueeze(-1), True)
        cur = torch.where(ok, torch.gather(parent, 1, cur.clamp(min=0)), -1)
    return mask[..., :n]


def _child_links(parent: torch.Tensor):
    """First child and next sibling, children ordered by increasing position."""
    bs, n = parent.shape
    dev = parent.device
    idx = torch.arange(n, device=dev).expand(bs, n)
    has_parent = parent >= 0
    # First child: smallest index among nodes whose parent is p.
    big = torch.full((bs, n + 1), n, dtype=torch.int64, device=dev)
    tgt = torch.where(has_parent, parent, n)  # slot n collects parentless nodes
    big.scatter_reduce_(1, tgt, idx, reduce="amin", include_self=True)
    first_child = big[:, :n]
    first_child = torch.where(first_child == n, -1, first_child)
    # Next sibling: the next node (by index) with the same parent.
    key = torch.where(has_parent, parent, n) * (n + 1) + idx
    order = torch.argsort(key, dim=1)  # keys are unique, so the order is deterministic
    sorted_parent = torch.gather(torch.where(has_parent, parent, n), 1, order)
    nxt_same = torch.cat([sorted_parent[:, 1:] == sorted_parent[:, :-1], torch.zeros(bs, 1, dtype=torch.bool, device=dev)], 1)
    nxt_node = torch.cat([order[:, 1:], torch.full((bs, 1), -1, dtype=torch.int64, device=dev)], 1)
    sib_sorted = torch.where(nxt_same & (sorted_parent < n), nxt_node, -1)
    next_sibling = torch.full((bs, n), -1, dtype=torch.int64, device=dev)
    next_sibling.scatter_(1, order, sib_sorted)
    return first_child, next_sibling


def build_verify_layout_reference(tree: DraftTree, root_tokens: torch.Tensor, prefix_lens: torch.Tensor) -> VerifyLayout:
    """Loop-per-node reference of :func:`build_verify_layout`."""
    bs, B = tree.depth.shape
    n = B + 1
    tokens = torch.zeros(bs, n, dtype=torch.int64)
    depth = torch.zeros(bs, n, dtype=torch.int64)
    parent = torch.full((bs, n), -1, dtype=torch.int64)
    mask = torch.zeros(bs, n, n, dtype=torch.bool)
    first = torch.full((bs, n), -1, dtype=torch.int64)
    sib = torch.full((bs, n), -1, dtype=torch.int64)
    for b in range(bs):
        tokens[b, 0] = int(root_tokens[b])
        for i in range(B):
            if int(tree.depth[b, i]) <= 0:
                continue
            tokens[b, i + 1] = int(tree.token[b, i])
            depth[b, i + 1] = int(tree.depth[b, i])
            p = int(tree.parent[b, i])
            parent[b, i + 1] = p + 1 if p >= 0 else 0
        for i in range(n):
            mask[b, i, i] = True
            j = int(parent[b, i])
            while j >= 0:
                mask[b, i, j] = True
                j = int(parent[b, j])
        for p in range(n):
            kids = [i for i in range(n) if int(parent[b, i]) == p]
            if kids:
                first[b, p] = kids[0]
                for a, c in zip(kids, kids[1:]):
                    sib[b, a] = c
    return VerifyLayout(
        tokens=tokens, depth=depth, positions=prefix_lens.view(bs, 1).long().cpu() + depth,
        parent=parent, ancestor_mask=mask, first_child=first, next_sibling=sib,
        retrieve_index=torch.arange(bs * n).view(bs, n),
    )
