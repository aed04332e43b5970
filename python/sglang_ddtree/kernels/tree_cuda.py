"""CUDA tree kernels (``sgl-kernel/csrc/ddtree_tree.cu``): one launch builds the best-first
tree and its verify layout, one launch walks it. Bit-identical to
``core.tree_builder.build_tree_reference`` / ``core.verify_layout`` / ``core.accept``.

The extension is compiled on first use with ``torch.utils.cpp_extension`` for the current
GPU (cached under the build directory); where that is impossible, :func:`available` says
why and callers use the torch implementation in ``sglang_ddtree.core``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Optional

import torch

from ..core.accept import Acceptance
from ..core.tree_builder import DraftTree, _caps
from ..core.verify_layout import VerifyLayout

def _find_csrc() -> Path:
    here = Path(__file__).resolve()
    # Repository checkout (python/sglang_ddtree/...) or the offline bundle (site/sglang_ddtree/...).
    for base in (here.parents[3], here.parents[2]):
        if (base / "sgl-kernel" / "csrc" / "ddtree_tree.cu").exists():
            return base / "sgl-kernel" / "csrc"
    return here.parents[3] / "sgl-kernel" / "csrc"


_CSRC = _find_csrc()


@functools.lru_cache(maxsize=1)
def _load():
    from torch.utils.cpp_extension import load

    from ..tiny_models import build_dir

    out = build_dir().parent / "torch_ext" / "ddtree_tree"
    out.mkdir(parents=True, exist_ok=True)
    return load(
        name="sglang_ddtree_tree",
        sources=[str(_CSRC / "ddtree_bind.cpp"), str(_CSRC / "ddtree_tree.cu"), str(_CSRC / "ddtree_gdn_commit.cu")],
        extra_cuda_cflags=["-O3"],
        build_directory=str(out),
        verbose=os.environ.get("SGLANG_DDTREE_VERBOSE_BUILD") == "1",
    )


def available() -> Optional[str]:
    """None when the kernels can be used, else the reason they cannot."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not (_CSRC / "ddtree_tree.cu").exists():
        return f"kernel sources not found at {_CSRC}"
    try:
        _load()
    except Exception as e:  # compiler missing, wrong toolkit, ...
        return f"build failed: {e}"
    return None


def build_tree_and_layout(
    lp: torch.Tensor,
    ids: torch.Tensor,
    root_tokens: torch.Tensor,
    prefix_lens: torch.Tensor,
    budget: int,
    max_siblings: Optional[int] = None,
    max_depth: Optional[int] = None,
) -> tuple[DraftTree, VerifyLayout]:
    """Same contract as ``core.step.draft_tree_to_verify``; ``lp``/``ids``: ``[bs, L, K]``."""
    L, K = lp.shape[1], lp.shape[2]
    l_eff, k_eff = _caps(L, K, max_siblings, max_depth)
    outs = _load().build_tree_layout(
        lp.float().contiguous(), ids.long().contiguous(), root_tokens.long().contiguous(),
        prefix_lens.long().contiguous(), budget, l_eff, k_eff,
    )
    t_depth, t_parent, t_rank, t_token, t_score, tokens, depth, pos, parent, first, nxt, mask = outs
    bs, n = tokens.shape
    tree = DraftTree(depth=t_depth, parent=t_parent, rank=t_rank, token=t_token, score=t_score)
    layout = VerifyLayout(
        tokens=tokens, depth=depth, positions=pos, parent=parent, ancestor_mask=mask,
        first_child=first, next_sibling=nxt,
        retrieve_index=torch.arange(bs * n, device=tokens.device).view(bs, n),
    )
    return tree, layout


def tree_walk(layout: VerifyLayout, target: torch.Tensor, max_depth: int) -> Acceptance:
    accepted, accept_len, new_tokens = _load().tree_walk(
        layout.tokens.contiguous(), layout.first_child.contiguous(),
        layout.next_sibling.contiguous(), target.long().contiguous(), max_depth,
    )
    return Acceptance(accepted=accepted, accept_len=accept_len, new_tokens=new_tokens, num_new=accept_len + 1)


def gdn_tree_commit(state, state_idx, u, G, k, accepted, accept_len) -> None:
    """CUDA tree-GDN state commit, same contract as ``gdn_tree_triton.tree_gdn_commit``."""
    _load().gdn_tree_commit(
        state, state_idx.to(torch.int32).contiguous(), u, G, k.contiguous(),
        accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(),
    )
