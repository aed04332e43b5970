"""Snapshot-free tree GatedDeltaNet: Triton kernels by stage, each beside its plain-torch reference.

- :mod:`.verify`: ``tree_gdn_verify`` (every node's output of the draft trees, and ``u`` / ``G``
  for the commit) with its :class:`VerifyOptions`;
- :mod:`.commit`: the recurrent state commit of the accepted path (``tree_gdn_commit*``);
- :mod:`.conv`: the tree causal conv and its commit (``tree_conv``, ``tree_conv_commit*``);
- :mod:`.heuristics`: the launch choices left to the kernels, as one table of rules;
- :mod:`.dots`: the device helpers and launch arguments the stages share;
- :mod:`.naive`: the plain-torch references (per path in float64, and the vectorised tree forms).
"""

from .commit import conv_weight_tables, tree_gdn_commit, tree_gdn_commit_from_x_layers, tree_gdn_commit_layers
from .conv import tree_conv, tree_conv_commit, tree_conv_commit_layers
from .heuristics import apply_as_dependent, block_chunk, pick_impl, prep_forms_pairs, register_limit
from .verify import PRECISIONS, SOLVE_PRECISIONS, VerifyOptions, tree_gdn_verify

__all__ = [
    "PRECISIONS", "SOLVE_PRECISIONS", "VerifyOptions", "tree_gdn_verify",
    "tree_gdn_commit", "tree_gdn_commit_layers", "tree_gdn_commit_from_x_layers", "conv_weight_tables",
    "tree_conv", "tree_conv_commit", "tree_conv_commit_layers",
    "pick_impl", "prep_forms_pairs", "apply_as_dependent", "register_limit", "block_chunk",
]
