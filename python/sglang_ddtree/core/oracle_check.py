"""``--speculative-ddtree-oracle-rate``: re-check a DDTREE step by a sequential target replay.

A checked step replays, for every greedy request, the tokens the step committed as a *chain*:
input ``[root, t_0, ..., t_{a-1}]`` at positions ``prefix .. prefix + a`` with the causal mask,
which is exactly what a target decoding one token at a time computes. Sequential greedy
decoding would have produced ``t_0, ..., t_a`` (``t_a`` is the bonus), so the step is right iff
the replay's argmax at chain position ``t`` equals ``t_t`` for every ``t <= a``. Both helpers
are pure tensor functions; the worker runs the replay forward (into scratch KV slots, so the
committed cache is untouched).
"""

from __future__ import annotations

import torch

from .tree_builder import DraftTree


def replay_chain(new_tokens: torch.Tensor, accept_len: torch.Tensor, nodes: int) -> DraftTree:
    """The replay as a ``[bs, nodes]`` draft tree: a chain of the ``accept_len[b]`` accepted
    tokens under the root (``new_tokens [bs, P]``: accepted tokens then the bonus), padding
    after it (depth -1, parent -1, token -1), in the builder's conventions."""
    bs = new_tokens.shape[0]
    dev = new_tokens.device
    i = torch.arange(nodes, device=dev).expand(bs, nodes)
    on = i < accept_len.view(bs, 1)
    tok = torch.full((bs, nodes), -1, dtype=new_tokens.dtype, device=dev)
    width = min(nodes, new_tokens.shape[1])
    tok[:, :width] = new_tokens[:, :width]
    return DraftTree(
        depth=torch.where(on, i + 1, -1),
        parent=torch.where(on, i - 1, -1),
        rank=torch.where(on, 0, -1),
        token=torch.where(on, tok, -1),
        score=torch.where(on, 0.0, float("-inf")),
    )


def replay_mismatch(replay_argmax: torch.Tensor, new_tokens: torch.Tensor, accept_len: torch.Tensor) -> torch.Tensor:
    """``[bs]`` bool: the replay disagrees with what the step committed.

    ``replay_argmax [bs, n]`` target argmax at chain positions (0 = the root); ``new_tokens
    [bs, P]`` committed tokens (accepted drafts, then the bonus at index ``accept_len``).
    """
    bs, n = replay_argmax.shape
    p = min(n, new_tokens.shape[1])
    t = torch.arange(p, device=replay_argmax.device).expand(bs, p)
    checked = t <= accept_len.view(bs, 1)
    differ = replay_argmax[:, :p] != new_tokens[:, :p]
    return (differ & checked).any(dim=1)
