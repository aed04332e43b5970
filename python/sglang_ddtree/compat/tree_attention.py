"""The tree verify's and the drafter block's attention on sglang's triton backend through
``kernels.tree_attention``.

sglang 0.5.17's ``TritonAttnBackend.forward_extend`` runs a tree verify (a custom mask) and the
DFlash drafter's block (16 queries, no mask) through ``extend_attention_fwd``: one program per
(request, head, 64 query rows) looping over the whole committed context, so a window of a few
dozen queries leaves most of the GPU idle. The backend holds that kernel as an instance attribute
(``self.extend_attention_fwd``), called with the same arguments for every extend; there is no
other seam. An AFTER hook on ``TritonAttnBackend.__init__`` of a DDTREE server
(``--speculative-ddtree-tree-attention`` auto or split-kv) wraps that attribute, on the target's
backend and on the drafter's:

- target: a call with a custom mask, causal, no sliding window (on a DDTREE target a custom mask
  is present only in TARGET_VERIFY forwards);
- drafter: also a call without a mask (causal or not, any sliding window) of at most
  ``DRAFT_MAX_WINDOW`` queries per request (the draft block; a prefill stays with sglang);

and in both nothing the split kernel does not implement (logit cap, sinks, fp8 scales, score
mods, LSE output, skipped stages, non-3-D pools) runs ``kernels.tree_attention.tree_attention_fwd``;
every other call goes to sglang's kernel unchanged.
"""

from __future__ import annotations

import inspect
import logging

from ..server_args import split_kv_tree_attention

logger = logging.getLogger(__name__)

_TARGET = "sglang.srt.layers.attention.triton_backend.TritonAttnBackend.__init__"
DRAFT_MAX_WINDOW = 64  # queries per request of an unmasked drafter call the split kernel takes


def _is_one(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and float(x) == 1.0)


def _window(a: dict) -> int:
    w = a.get("sliding_window_size")
    return int(w) if w is not None and w > 0 else -1


def split_kv_applies(a: dict, drafter: bool = False) -> bool:
    """Whether an ``extend_attention_fwd`` call (its bound arguments) is one the split kernel
    serves exactly: a tree verify (custom mask, causal, no sliding window) or, with ``drafter``,
    also an unmasked draft block of at most ``DRAFT_MAX_WINDOW`` queries per request."""
    from ..kernels.tree_attention import supports

    if a.get("custom_mask") is not None:
        mode = (bool(a.get("is_causal")) and a.get("skip_prefix_custom_mask", True) and _window(a) < 0
                and a.get("window_kv_offsets") is None)
    else:  # (sglang reads window_kv_offsets only with a custom mask)
        mode = drafter and int(a["max_len_extend"]) <= DRAFT_MAX_WINDOW
    return (mode and not a.get("logit_cap") and a.get("sinks") is None
            and (a.get("xai_temperature_len") is None or a.get("xai_temperature_len") <= 0)
            and a.get("lse_extend") is None and not a.get("skip_prefix") and not a.get("skip_extend")
            and a.get("score_mod") is None and _is_one(a.get("k_scale")) and _is_one(a.get("v_scale"))
            and supports(a["q_extend"], a["k_buffer"], a["v_buffer"], a["k_extend"])
            and a["v_extend"].shape == a["k_extend"].shape)


def wrap(upstream, drafter: bool = False):
    """``upstream`` (sglang's ``extend_attention_fwd``) with the calls :func:`split_kv_applies`
    accepts sent to the split kernel."""
    from ..kernels.tree_attention import tree_attention_fwd

    sig = inspect.signature(getattr(upstream, "__wrapped__", upstream))

    def extend_attention_fwd(*args, **kwargs):
        a = sig.bind(*args, **kwargs).arguments
        if not split_kv_applies(a, drafter):
            return upstream(*args, **kwargs)
        q = a["q_extend"]
        tree_attention_fwd(q, a["k_extend"], a["v_extend"], a["o_extend"], a["k_buffer"], a["v_buffer"],
                           a["qo_indptr"], a["kv_indptr"], a["kv_indices"], a["custom_mask"], a["mask_indptr"],
                           int(a["max_len_extend"]), a.get("sm_scale") or q.shape[-1] ** -0.5,
                           causal=bool(a.get("is_causal")), sliding_window=_window(a))

    extend_attention_fwd.ddtree_split_kv = True
    return extend_attention_fwd


def _after_init(result, self, model_runner, *args, **kwargs):
    if not split_kv_tree_attention(model_runner.server_args):
        return result
    if not getattr(self.extend_attention_fwd, "ddtree_split_kv", False):
        drafter = bool(model_runner.is_draft_worker)
        self.extend_attention_fwd = wrap(self.extend_attention_fwd, drafter=drafter)
        logger.info("DDTREE %s attention: split-KV Triton kernel (kernels/tree_attention) on the triton backend; "
                    "--speculative-ddtree-tree-attention backend runs sglang's extend kernel instead",
                    "drafter block" if drafter else "tree verify")
    return result


def register_tree_attention_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _after_init, HookType.AFTER)
