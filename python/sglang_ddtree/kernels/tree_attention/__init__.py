"""Tree-verify attention: the queries of a verify window attend to their request's committed KV
(no mask) and to their ancestors among the window's own tokens (the tree mask).

- :mod:`.splitkv`: ``tree_attention_fwd``, the Triton kernels (the committed KV split across
  programs, then the window's tree part and the merge);
- :mod:`.naive`: ``tree_attention_reference``, the plain-torch reference.
"""

from .naive import tree_attention_reference
from .splitkv import SplitPlan, split_plan, supports, tree_attention_fwd

__all__ = ["tree_attention_reference", "tree_attention_fwd", "supports", "SplitPlan", "split_plan"]
