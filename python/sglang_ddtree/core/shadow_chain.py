"""What the DFLASH chain would have accepted in a DDTREE step (``--speculative-ddtree-shadow-linear``).

DFlash drafts every depth of the block in parallel, so the candidates at depth d are the same
for every parent and the DFLASH chain is the rank-0 candidate of each depth. In a DDTree the
chain's nodes are those whose whole ancestry is rank 0. Siblings carry distinct tokens, so while
the chain's node matches the target the tree walk goes there too: the chain accepts the leading
run of chain nodes on the accepted path. If the whole path is chain, the walk stopped either
because the chain's next token differs from the target at the last node (the chain stops too)
or because the budget left that node out of the tree; then the chain accepts one more token,
and what it would accept after that is unknown (no target computed there): the step is
reported as censored (a lower bound), never guessed.
"""

from __future__ import annotations

import torch


def shadow_chain_accept(accepted: torch.Tensor, accept_len: torch.Tensor, node_rank: torch.Tensor,
                        chain_tokens: torch.Tensor, bonus: torch.Tensor, max_depth: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain accept length ``[bs]`` and censored flags ``[bs]`` (bool).

    Args:
        accepted: ``[bs, L+1]`` verify positions of the accepted path (root first, -1 padded).
        accept_len: ``[bs]`` accepted drafts of the tree walk.
        node_rank: ``[bs, N]`` candidate rank per verify position (root: 0; padding: -1).
        chain_tokens: ``[bs, L]`` the rank-0 candidate of each depth (the DFLASH chain's drafts).
        bonus: ``[bs]`` the target's token at the last accepted node.
        max_depth: L.
    """
    bs, T = accepted.shape
    t = torch.arange(T, device=accepted.device).expand(bs, T)
    on_path = (t >= 1) & (t <= accept_len.unsqueeze(1))
    rank_on_path = node_rank.gather(1, accepted.clamp(min=0))
    chain_step = on_path & (rank_on_path == 0)
    run = torch.cumprod(chain_step[:, 1:].long(), dim=1).sum(1)
    all_chain = run == accept_len.long()
    room = accept_len.long() < min(max_depth, chain_tokens.shape[1])
    nxt = chain_tokens.gather(1, accept_len.long().clamp(max=chain_tokens.shape[1] - 1).unsqueeze(1)).squeeze(1)
    one_more = all_chain & room & (nxt == bonus)
    run = run + one_more.long()
    censored = one_more & (run < max_depth)
    return run, censored
