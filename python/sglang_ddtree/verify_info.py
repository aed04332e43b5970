"""The DDTREE tree verify: prepare, verify forward and commit (sglang's ``*_info.py`` beside its
``*_worker.py``).

A :class:`DDTreeVerifyInput` is a DFLASH verify input that carries a tree: ``tree_topk = -1``
(an irregular tree, as NGRAM's input) makes sglang's attention backends apply ``custom_mask``.

- :meth:`DDTreeVerifyInput.build`: the input for a verify layout ``[bs, W]``: tokens, depth
  positions, the ancestor mask in the attention backend's layout, and for hybrid targets the
  tree of the GatedDeltaNet layers (wy: into ``engine.tree_gdn``'s workspace; snapshot: sglang's
  first-child / next-sibling links);
- :meth:`DDTreeVerifyInput.verify`: one TARGET_VERIFY forward of the target (a CUDA graph
  captured with the tree mask, or eager), through the runtime of the step's width under budget
  auto, with DFLASH's logit adjustments;
- :meth:`DDTreeVerifyInput.commit`: the KV window written path first into ``req_to_token``
  (``core.commit_plan``) and, on hybrid targets, the linear-attention state of the accepted path
  written into the request's slots;
- :func:`apply_grammar`: structured output, the grammar's mask of every tree node on the verify
  logits (the root's alone for a grammar that cannot roll back, whose request then commits one
  token this step: :func:`root_only_layout`);
- :func:`output_logprobs`: the log-probabilities of the committed tokens (``return_logprob``),
  from the verify logits of the path's nodes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Dict, Optional

import torch

from sglang.srt.constrained.base_grammar_backend import BaseGrammarObject, GrammarMask
from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarObject
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode
from sglang.srt.speculative.dflash_info import DFlashVerifyInput
from sglang.srt.speculative.dflash_utils import apply_dflash_verify_logits_adjustments
from sglang.srt.speculative.spec_utils import traverse_tree

from .compat.releases import compute_accepted_logprobs
from .core.commit_plan import CommitPlan
from .core.verify_layout import VerifyLayout
from .engine import tree_gdn
from .engine.verify_widths import VerifyRuntime, verify_runtime
from .server_args import GDN_SNAPSHOT, GDN_WY, eager_verify


@dataclass
class DDTreeVerifyInput(DFlashVerifyInput):
    tree_topk: int = -1
    # Snapshot mode: first child / next sibling per verify position ``[bs, W]`` (int64, -1 =
    # none), read by sglang's linear-attention tree verify. None otherwise.
    retrieve_next_token: Optional[torch.Tensor] = None
    retrieve_next_sibling: Optional[torch.Tensor] = None

    @classmethod
    def build(cls, layout: VerifyLayout, prefix_lens: torch.Tensor, batch, gdn: Optional[str],
              capture_hidden: bool = True) -> "DDTreeVerifyInput":
        """The verify input of ``layout`` (``[bs, W]``) for ``batch``; ``gdn``: how a hybrid target's
        GatedDeltaNet layers verify (``server_args.GDN_WY`` / ``GDN_SNAPSHOT``), None for an
        attention-only target. In wy mode the tree goes into the workspace now."""
        out = cls(draft_token=layout.tokens.reshape(-1), positions=layout.positions.reshape(-1),
                  draft_token_num=layout.tokens.shape[1], custom_mask=verify_mask(layout, prefix_lens, batch),
                  capture_hidden_mode=CaptureHiddenMode.FULL if capture_hidden else CaptureHiddenMode.NULL)
        if gdn == GDN_SNAPSHOT or (gdn == GDN_WY and tree_gdn.cross_check_enabled()):
            # (The wy cross-check also runs sglang's per-node verify: it needs the links too.)
            out.retrieve_next_token = layout.first_child.contiguous()
            out.retrieve_next_sibling = layout.next_sibling.contiguous()
        if gdn == GDN_WY:
            tree_gdn.workspace().begin_step(layout.parent, layout.ancestor_mask)
        return out

    def prepare_for_verify(self, batch, target_worker):
        """DFLASH's preparation (it loads the batch into the graph runner when a graph can run);
        under ``--speculative-ddtree-eager-verify`` an eager forward batch."""
        if not eager_verify():
            return DFlashVerifyInput.prepare_for_verify(self, batch, target_worker)
        batch.input_ids = self.draft_token
        batch.spec_info = self
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        forward_batch = ForwardBatch.init_new(batch, target_worker.model_runner,
                                              capture_hidden_mode=self.capture_hidden_mode,
                                              return_hidden_states_before_norm=False)
        target_worker.model_runner.attn_backend.init_forward_metadata(forward_batch)
        return forward_batch, False

    def verify(self, batch, target_worker, window: torch.Tensor, runtimes: Dict[int, VerifyRuntime], timer=None):
        """One TARGET_VERIFY forward, KV written to ``window`` (``[bs * W]`` slots). The
        scheduler's host lengths are raised by the width for the forward's attention metadata
        and restored. The logits get DFLASH's adjustments (logit bias, custom logit processors; one
        per request, broadcast over the positions; sglang applies no penalty here: the worker
        applies them per node, ``engine.penalty_state``)."""
        width = int(self.draft_token_num)
        batch.out_cache_loc = window
        seq_lens_cpu, seq_lens_sum = batch.seq_lens_cpu, batch.seq_lens_sum
        if seq_lens_cpu is not None:
            batch.seq_lens_cpu = seq_lens_cpu + width
            batch.seq_lens_sum = int(batch.seq_lens_cpu.sum())
        with verify_runtime(target_worker.model_runner, runtimes, width):
            forward_batch, _ = self.prepare_for_verify(batch, target_worker)
            forward_batch.return_logprob = False  # the committed tokens' logprobs: output_logprobs
            batch.seq_lens_cpu, batch.seq_lens_sum = seq_lens_cpu, seq_lens_sum
            with timer.phase("verify") if timer is not None else contextlib.nullcontext():
                out = target_worker.forward_batch_generation(batch=None, forward_batch=forward_batch, is_verify=True,
                                                             skip_attn_backend_init=True)
        apply_dflash_verify_logits_adjustments(next_token_logits=out.logits_output.next_token_logits,
                                               sampling_info=batch.sampling_info, draft_token_num=width)
        return out

    def commit(self, batch, plan: CommitPlan, accepted: torch.Tensor, accept_len: torch.Tensor,
               req_to_token: torch.Tensor, prefix_lens: torch.Tensor, pre_verify_lens: Optional[torch.Tensor],
               target_worker, gdn: Optional[str], runtimes: Dict[int, VerifyRuntime]) -> None:
        """After acceptance: the hybrid state of the accepted path into the requests' slots
        (``pre_verify_lens``: the committed lengths copied before the verify), then the window
        path first into ``req_to_token`` (rows of ``batch.req_pool_indices``, columns
        ``prefix_lens .. + W``), or with pages of more than one token (``plan.move_src``) the
        path's KV moved into the window's first slots."""
        if gdn is not None:
            self._commit_linear_state(batch, accepted, accept_len, pre_verify_lens, plan.commit_lens, target_worker,
                                      gdn, runtimes)
        if plan.move_src is not None:
            self._move_path_kv(batch, plan, req_to_token, prefix_lens, target_worker)
            return
        W = plan.new_window.shape[1]
        cols = prefix_lens.long().unsqueeze(1) + torch.arange(W, device=prefix_lens.device)
        req_to_token[batch.req_pool_indices.long().unsqueeze(1), cols] = plan.new_window.to(req_to_token.dtype)

    def _move_path_kv(self, batch, plan: CommitPlan, req_to_token: torch.Tensor, prefix_lens: torch.Tensor,
                      target_worker) -> None:
        """``plan.move_src -> plan.move_dst`` (``[bs, P]`` slots) in the target's KV pool, through
        the slots of positions ``prefix + W .. + P - 1``: sources and destinations overlap, and
        the pool's copy kernel gives no order between entries. Those positions are the request's
        own (DFLASH reserves ``2 W`` past the committed length each step) and hold nothing
        committed."""
        bs, P = plan.move_src.shape
        W = int(self.draft_token_num)
        cols = prefix_lens.long().unsqueeze(1) + W + torch.arange(P, device=prefix_lens.device)
        scratch = req_to_token[batch.req_pool_indices.long().unsqueeze(1), cols].long().reshape(-1)
        pool = target_worker.model_runner.token_to_kv_pool
        pool.move_kv_cache(scratch, plan.move_src.reshape(-1).long())
        pool.move_kv_cache(plan.move_dst.reshape(-1).long(), scratch)

    def _commit_linear_state(self, batch, accepted, accept_len, prefix_lens, commit_lens, target_worker, gdn,
                             runtimes) -> None:
        width = int(self.draft_token_num)
        # The backend that ran this verify (budget auto: the width's runtime).
        rt = runtimes.get(width)
        attn_backend = rt.attn_backend if rt is not None else target_worker.model_runner.attn_backend
        bs = accepted.shape[0]
        ith = track_path_index(batch, prefix_lens, commit_lens)
        if gdn == GDN_WY:
            slots = attn_backend.linear_attn_backend.forward_metadata.mamba_cache_indices[:bs]
            if ith is None:
                tree_gdn.workspace().commit(slots, accepted, accept_len)
            else:
                tree_gdn.workspace().commit(slots, accepted, accept_len,
                                            track_slots=batch.mamba_track_indices[:bs], track_at=ith)
            return
        # Snapshot: sglang copies the last accepted node's per-node state; its "step index" is a
        # verify position here.
        last_node = accepted.gather(1, accept_len.long().unsqueeze(1)).squeeze(1)
        steps_to_track = None
        if ith is not None:
            node = accepted.gather(1, ith.clamp(0, accepted.shape[1] - 1).unsqueeze(1)).squeeze(1).long()
            steps_to_track = torch.where(ith >= 0, node, torch.full_like(node, -1))
        attn_backend.update_mamba_state_after_mtp_verify(
            last_correct_step_indices=last_node.long(), mamba_track_indices=batch.mamba_track_indices,
            mamba_steps_to_track=steps_to_track, model=target_worker.model_runner.model,
            req_pool_indices=batch.req_pool_indices[:bs])


def verify_mask(layout: VerifyLayout, prefix_lens: torch.Tensor, batch) -> torch.Tensor:
    """The ancestor mask in the layout the attention backend reads: sglang's QLEN_ONLY on the CPU
    (intel_amx) backend, FULL_MASK (prefix columns included, sized by the host-known prefix sum)
    on GPU backends."""
    if not layout.tokens.is_cuda:
        return layout.qlen_only_mask()
    total = batch.seq_lens_sum
    if total is None:
        # Overlap scheduling carries no host-side lengths: the DFLASH reservation is a host-known
        # upper bound, else the exact sum is read (one host sync).
        reserved = getattr(batch.spec_info, "reserved_seq_lens_sum", None)
        total = int(reserved) if reserved is not None else int(prefix_lens.sum())
    return layout.full_mask(prefix_lens, int(total))


def prepare_state_tracking(batch) -> None:
    """Hybrid targets with the radix cache's state tracking (mamba extra buffer): point
    ``batch.mamba_track_indices`` at each request's current tracking slot before the verify, so
    the commit can write the state at a tracking boundary there (sglang's helper, which its EAGLE,
    NGRAM and DSPARK workers call before their verify). No-op without extra buffer."""
    from sglang.srt.speculative.spec_utils import prepare_mamba_track_for_verify

    prepare_mamba_track_for_verify(batch)


def track_path_index(batch, prefix_lens: torch.Tensor, commit_lens: torch.Tensor) -> Optional[torch.Tensor]:
    """Prefix-cache state tracking: ``[bs]`` the index on the accepted path of the token that lands
    on a tracking boundary (its state is the one the radix cache keeps), -1 where this step
    crosses none; None when nothing is tracked."""
    if batch.mamba_track_indices is None:
        return None
    from sglang.srt.runtime_context import get_exec

    interval = get_exec().mamba.mamba_track_interval
    new_lens = prefix_lens + commit_lens.to(prefix_lens.dtype)
    crosses = prefix_lens // interval != new_lens // interval
    ith = torch.clamp(new_lens // interval * interval - prefix_lens - 1, min=0).long()
    ok = crosses & (ith < commit_lens.long())
    return torch.where(ok, ith, torch.full_like(ith, -1))


def output_logprobs(batch, logits_output, target: torch.Tensor, accepted: torch.Tensor) -> None:
    """The log-probabilities of a step's committed tokens, for requests with ``return_logprob``:
    ``target [bs, W]`` the target's token per verify position, ``accepted [bs, P]`` the path's
    positions (root first, -1 padded). The committed token ``j`` of request ``b`` is
    ``target[b, accepted[b, j]]``; its logprobs come from that position's verify logits (after
    DFLASH's adjustments), as sglang's speculative v2 output computes them: greedy requests from
    the logits, sampled ones at their temperature; top-``n`` and requested token ids too. Sets
    ``logits_output.next_token_logprobs [bs, P]`` and the top / token-id lists, ``P`` entries
    per request (those past a request's commit length are never read)."""
    bs, W = target.shape
    rows = accepted.long().clamp(min=0) + torch.arange(bs, device=accepted.device).unsqueeze(1) * W
    compute_accepted_logprobs(batch, logits_output, target.reshape(-1), rows)


def tree_walkable(grammar) -> bool:
    """Whether ``grammar`` can be walked over a tree: advanced along a path and rolled back.
    sglang's xgrammar and llguidance grammars can; its outlines grammar has no ``rollback``
    (and a boolean mask instead of the packed bitmask sglang's tree walk reads). A reasoning
    wrapper is walkable when the grammar it wraps is."""
    if isinstance(grammar, ReasonerGrammarObject) and grammar.grammar is not None:
        grammar = grammar.grammar
    return type(grammar).rollback is not BaseGrammarObject.rollback


def apply_grammar(batch, grammar_tree, next_token_logits: torch.Tensor, barrier) -> Optional[torch.Tensor]:
    """Structured output: every verify position of a grammar request gets its grammar's mask
    in place on ``next_token_logits [bs * W, vocab]``. ``grammar_tree``: sglang's
    ``GrammarTree`` of the step's tree (first child / next sibling links and tokens ``[bs, W]``,
    copied to the host before the verify launch); sglang's tree walk (``traverse_tree``, the one
    EAGLE trees use) advances the grammar along each path from the committed state, so the mask
    at a node allows what the grammar allows after that node's path. A node whose token its
    parent's mask forbids is never accepted: the target's token there is an allowed one.
    ``barrier``: the scheduler's grammar barrier (the previous batch's tokens accepted into the
    grammars first).

    A grammar that cannot be walked (:func:`tree_walkable`) gets its root's mask only, from its
    committed state, as plain decoding would; returns those requests ``[bs]`` bool on the
    logits' device (None when there are none): the caller accepts none of their draft nodes
    (:func:`root_only_layout`), so each commits this step the one token plain decoding would."""
    if barrier is not None:
        barrier()
    first_child, next_sibling, tokens = grammar_tree.resolve()
    bs, W = tokens.shape
    vocab = batch.sampling_info.vocab_size
    mask, handle, root_only = None, None, []
    for i, req in enumerate(batch.reqs):
        grammar = req.grammar
        if grammar is None:
            continue
        if mask is None:
            mask = grammar.allocate_vocab_mask(vocab_size=vocab, batch_size=bs * W, device="cpu")
            handle = grammar
        rows = mask[i * W : (i + 1) * W]
        if tree_walkable(grammar):
            traverse_tree(first_child[i], next_sibling[i], tokens[i], grammar, rows, vocab_size=vocab)
        else:
            if not grammar.is_terminated():
                grammar.fill_vocab_mask(rows, 0)
            root_only.append(i)
    if mask is None:
        return None
    batch.sampling_info.grammar_mask = None  # (else the extend's leftover mask would be applied)
    GrammarMask(handle, mask.to(next_token_logits.device, non_blocking=True)).apply(next_token_logits)
    if not root_only:
        return None
    flags = torch.zeros(bs, dtype=torch.bool)
    flags[root_only] = True
    return flags.to(next_token_logits.device)


def root_only_layout(layout: VerifyLayout, root_only: torch.Tensor) -> VerifyLayout:
    """``layout`` for the acceptance walk with no draft node of the ``root_only [bs]`` requests
    acceptable: their non-root tokens become -1, which no target token equals."""
    keep = ~root_only.view(-1, 1) | (torch.arange(layout.tokens.shape[1], device=layout.tokens.device) == 0)
    return dataclasses.replace(layout, tokens=torch.where(keep, layout.tokens, torch.full_like(layout.tokens, -1)))