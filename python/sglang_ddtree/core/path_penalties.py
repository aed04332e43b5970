"""Penalties along tree paths: the frequency, presence and repetition penalties and
``min_new_tokens``' stop-token suppression at every verify node, as sglang applies them when it
decodes that node's next token without speculation.

    logits    [bs, W, V]  float, in place (custom logit processors applied, grammar masks not yet)
    cum_freq  [bs, V]     fp32: the frequency penalty added once per committed output token
                          (sglang's ``cumulated_frequency_penalties``: sequential fp32 sums)
    present   [bs, V]     bool: the token is among the committed output tokens
    out_len   [bs]        committed output tokens
    tokens    [bs, W]     node tokens; position 0 is the root (committed, already counted)
    anc       [bs, W, W]  ancestor mask, self included, the tree in topological order
    depth     [bs, W]     node depth, the root 0
    freq, pres, rep [bs]  fp32 penalties (neutral 0, 0, 1); min_new [bs] int; stop [bs, V] bool

The output before node ``i``'s next token is the committed output followed by the tokens of
``i``'s path below the root (its ancestors but the root, itself included). Per node, in the order
of sglang's speculative penalty application: the additive penalties (``- cum_freq``, ``- pres``
where present, ``-inf`` at stop tokens while ``out_len + depth < min_new``), then the scaling one
(where present: ``x / rep`` if ``x > 0`` else ``x * rep``). A path token's frequency sum continues
the committed sum one fp32 addition per occurrence, as sglang's would.
"""

from __future__ import annotations

import torch


def path_multiplicity(tokens: torch.Tensor, anc: torch.Tensor) -> torch.Tensor:
    """``[bs, W, W]`` int: for node ``i`` and position ``j``, how many nodes of ``i``'s path below
    the root carry ``tokens[j]`` (0: that token is not on the path)."""
    on_path = anc.bool().clone()
    on_path[:, :, 0] = False
    same = tokens[:, :, None] == tokens[:, None, :]                        # [bs, j, k]
    return (on_path[:, :, None, :] & same[:, None, :, :]).sum(-1)


def apply_path_penalties(logits: torch.Tensor, cum_freq: torch.Tensor, present: torch.Tensor,
                         out_len: torch.Tensor, tokens: torch.Tensor, anc: torch.Tensor, depth: torch.Tensor,
                         freq: torch.Tensor, pres: torch.Tensor, rep: torch.Tensor, min_new: torch.Tensor,
                         stop: torch.Tensor) -> None:
    """The penalties of every node on ``logits [bs, W, V]`` in place (see the module docstring)."""
    bs, W, V = logits.shape
    mult = path_multiplicity(tokens, anc)
    idx = tokens.long()[:, None, :].expand(bs, W, W)                      # [bs, i, j] token of j
    orig = logits.gather(2, idx)                                          # before any penalty
    # Rows: the committed output's penalties.
    logits.sub_(cum_freq[:, None, :].to(logits.dtype))
    logits.sub_((pres[:, None] * present)[:, None, :].to(logits.dtype))
    suppress = (out_len[:, None] + depth) < min_new[:, None]              # [bs, W]
    logits.masked_fill_(suppress[:, :, None] & stop[:, None, :], float("-inf"))
    scale = torch.where(present, rep[:, None], torch.ones_like(rep)[:, None])[:, None, :]
    logits.copy_(torch.where(logits > 0, logits / scale, logits * scale))
    # Path tokens: recomputed from the raw logit with the node's own counts.
    f = cum_freq.gather(1, tokens.long())[:, None, :].expand(bs, W, W).clone()
    fr = freq[:, None, None].expand(bs, W, W)
    for r in range(W - 1):  # (a path holds at most W - 1 tokens below the root; no host sync)
        f = torch.where(mult > r, f + fr, f)
    val = orig.float() - f
    val = val - pres[:, None, None]                                       # on the path: present
    stop_j = stop.gather(1, tokens.long())[:, None, :]
    val = torch.where(suppress[:, :, None] & stop_j, torch.full_like(val, float("-inf")), val)
    r_ = rep[:, None, None]
    val = torch.where(val > 0, val / r_, val * r_)
    # Entries of one (request, node, token) carry one value; a token off the path keeps its row's.
    logits.scatter_(2, idx, torch.where(mult > 0, val.to(logits.dtype), logits.gather(2, idx)))
