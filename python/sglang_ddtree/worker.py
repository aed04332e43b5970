"""DDTREE speculative worker for sglang: DFlash drafting, a best-first draft tree, one tree
verify forward of the target, tree-walk acceptance, and the KV commit of the accepted path.

Built on sglang's ``DFlashWorkerV2`` (drafter loading, draft KV pool, prefill path, the
draft-context KV writer); only the decode step differs:

1. Draft the DFlash block exactly as DFLASH does, but keep per-depth top-K log-probs
   (log-softmax over the full vocabulary, fp32; tensor-parallel: each rank's top-K over its
   vocabulary shard, all-gathered K candidates per rank, never the logits).
2. Build the tree (``sglang_ddtree.core``; CUDA kernel when built), lay out ``N`` verify
   positions per request (``N = max(budget + 1, block_size)``; unused positions are padding
   that attends to the prefix and itself only and is never accepted).
3. One TARGET_VERIFY forward with the ancestor mask and depth positions.
4. Walk the tree with the target's argmax (T = 0) or its per-node samples (T > 0).
5. Commit: the request's KV window (positions ``prefix .. prefix + N - 1``) is *permuted* so
   the accepted path comes first; no KV bytes move and no slot leaks (page size 1). The
   drafter's context KV is then written from the accepted nodes' target hidden states, in
   accepted order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from dataclasses import dataclass
from typing import Dict, Optional

import torch

from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode
from sglang.srt.speculative.dflash_info import DFlashVerifyInput
from sglang.srt.speculative.dflash_info_v2 import DFlashDraftInputV2
from sglang.srt.speculative.dflash_utils import apply_dflash_verify_logits_adjustments, parse_dflash_draft_config
from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.kernels.ops.speculative.cache_locs import assign_extend_cache_locs_func

from .core.accept import target_tokens, tree_walk
from .core.oracle_check import replay_chain, replay_mismatch
from .core.shadow_chain import shadow_chain_accept
from .compat.gdn_wy import WyVerifyState, wy_check_enabled, wy_commit
from .core.budget_choice import CHAIN, StepCostTable, furthest_budget
from .core.budget_policy import BudgetPolicy
from .compat.verify_graph import tree_verify_graphs_enabled
from .compat.verify_widths import build_verify_runtimes, verify_runtime
from .core.topk import local_topk, merge_rank_topk
from .core.tree_builder import build_tree, pad_tree
from .core.verify_layout import build_verify_layout, pad_layout
from .debug_log import DebugLog, StepTimer
from .metrics import DDTreeStats

logger = logging.getLogger(__name__)


@dataclass
class DDTreeVerifyInput(DFlashVerifyInput):
    """A DFLASH verify input that carries a tree: ``tree_topk = -1`` (irregular tree, as
    NGRAM's input does) makes attention backends apply ``custom_mask``."""

    tree_topk: int = -1
    # Hybrid targets (--speculative-ddtree-gdn-mode snapshot): first child / next sibling per
    # verify position ``[bs, N]`` (int64, -1 = none), read by sglang's linear-attention verify
    # (compat/hybrid_tree.py). None for attention-only targets.
    retrieve_next_token: Optional[torch.Tensor] = None
    retrieve_next_sibling: Optional[torch.Tensor] = None
    # Hybrid targets (--speculative-ddtree-gdn-mode wy): the tree for our GatedDeltaNet verify
    # and what its commit needs (compat/gdn_wy.py). None otherwise.
    ddtree_wy: Optional[WyVerifyState] = None

    def prepare_for_verify(self, batch, target_worker):
        """DFLASH's preparation when the tree verify replays CUDA graphs (the default:
        compat/verify_graph.py captures them with the tree mask; sglang's own DFlash-family
        capture has ``custom_mask=None``). With ``SGLANG_DDTREE_VERIFY_CUDA_GRAPH=0`` it never
        replays (the model runner's graph decision is guarded too:
        ``registration.register_graph_guards``) and the verify runs eagerly."""
        if tree_verify_graphs_enabled():
            return DFlashVerifyInput.prepare_for_verify(self, batch, target_worker)
        batch.input_ids = self.draft_token
        batch.spec_info = self
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        verify_forward_batch = ForwardBatch.init_new(
            batch, target_worker.model_runner, capture_hidden_mode=self.capture_hidden_mode,
            return_hidden_states_before_norm=False,
        )
        target_worker.model_runner.attn_backend.init_forward_metadata(verify_forward_batch)
        return verify_forward_batch, False


# Developer switch: wy mode with the radix cache's state tracking (not yet run on a GPU).


def verify_width(budget: int, block_size: int) -> int:
    """Verify positions per request: the tree plus its root, at least one draft block (the
    draft forward writes ``block_size`` slots of the same window)."""
    return max(int(budget) + 1, int(block_size))


def ddtree_verify_widths(server_args, block_size: int, caps: Optional[Dict[int, Optional[int]]] = None) -> list:
    """Every verify width a resolved DDTREE server captures graphs for: the budget's, or with
    --speculative-ddtree-budget auto each width its step-cost table lets the policy choose (the
    keys of :func:`ddtree_width_caps`, read from the table unless ``caps`` are given)."""
    caps = ddtree_width_caps(server_args, block_size) if caps is None else caps
    return sorted(caps) if caps else [verify_width(server_args.speculative_ddtree_budget, block_size)]


def policy_width_caps(table: StepCostTable, max_depth: int, block_size: int) -> Dict[int, Optional[int]]:
    """Per verify width budget auto can choose, the largest batch size it can choose it at (None:
    any): a budget is a candidate only up to the largest concurrency its table row was measured at
    (``budget_choice.candidates_at``), the chain at every batch size (without a chain row, the
    budget measured furthest); a width shared by several choices takes the largest. A width's
    graphs need no batch larger than that (verify_widths.py)."""
    caps: Dict[int, Optional[int]] = {}

    def widen(width: int, cap: Optional[int]) -> None:  # "any batch size" (None) wins over a cap
        caps[width] = None if cap is None or caps.get(width, 0) is None else max(caps.get(width, 0), cap)

    budgets = table.budgets()
    for b in budgets:
        widen(verify_width(b, block_size), int(table.max_concurrency(b)))
    if table.has_chain():
        widen(verify_width(max_depth, block_size), None)
    elif budgets:  # no chain: past every budget's rows the policy keeps the one measured furthest
        widen(verify_width(furthest_budget(table, budgets), block_size), None)
    return dict(sorted(caps.items()))


def ddtree_width_caps(server_args, block_size: int) -> Dict[int, Optional[int]]:
    """:func:`policy_width_caps` of a resolved DDTREE server with --speculative-ddtree-budget auto
    (empty for a fixed budget: its one width serves every batch size)."""
    if not server_args.speculative_ddtree_step_cost:
        return {}
    return policy_width_caps(StepCostTable.from_json(server_args.speculative_ddtree_step_cost),
                             int(server_args.speculative_ddtree_max_depth), block_size)


def drafter_block_size(draft_hf_config) -> int:
    """The DFlash drafter's block size, from its own config (16 when the config is silent)."""
    return int(parse_dflash_draft_config(draft_hf_config=draft_hf_config).resolve_block_size(default=16))


def path_first_permutation(accepted: torch.Tensor, width: int) -> torch.Tensor:
    """``[bs, width]`` permutation of window positions: the accepted path (root first), then
    every other position in increasing order. ``accepted``: ``[bs, T]``, -1 padded (T <= width)."""
    bs, T = accepted.shape
    dev = accepted.device
    # Sort rank: path index t (< T) for path positions, T + position for the rest.
    rank = torch.arange(width, device=dev).expand(bs, width) + T
    rank = torch.cat([rank, torch.zeros(bs, 1, dtype=rank.dtype, device=dev)], 1)  # sink column
    on = accepted >= 0
    t = torch.arange(T, device=dev).expand(bs, T)
    rank.scatter_(1, torch.where(on, accepted, width), torch.where(on, t, 0))
    return torch.argsort(rank[:, :width], dim=1)


def prepare_state_tracking(batch) -> None:
    """Hybrid targets with the radix cache's state tracking (mamba extra buffer): point
    ``batch.mamba_track_indices`` at each request's current tracking slot before the verify, so
    the commit can write the state at a tracking boundary there. Spec batches skip sglang's
    refresh in prepare_for_decode; EAGLE, NGRAM and DSPARK rebuild it before their verify with
    sglang's own helper, DFLASH (0.5.17's ``dflash_worker_v2``) does not, so its prefix cache
    keeps no state from decode steps (RESULTS.md session 7). No-op without extra buffer."""
    from sglang.srt.speculative.spec_utils import prepare_mamba_track_for_verify

    prepare_mamba_track_for_verify(batch)


class DDTreeWorker(DFlashWorkerV2):
    """``--speculative-algorithm DDTREE``."""

    def __init__(self, server_args, gpu_id, ps, nccl_port, target_worker):
        super().__init__(server_args, gpu_id, ps, nccl_port, target_worker)
        # DFlashWorkerV2 takes its block size from --speculative-num-draft-tokens, which for
        # DDTREE is the verify width; the drafter's block comes from its own config.
        self.block_size = drafter_block_size(self.draft_model_runner.model_config.hf_config)
        self.budget = int(server_args.speculative_ddtree_budget)
        self.topk = int(server_args.speculative_ddtree_topk)
        self.max_depth = int(server_args.speculative_ddtree_max_depth)
        self.width = verify_width(self.budget, self.block_size)
        self.speculative_num_draft_tokens = self.width
        if int(server_args.speculative_num_draft_tokens) != self.width:
            raise RuntimeError(
                f"DDTREE verify width mismatch: server args say {server_args.speculative_num_draft_tokens}, "
                f"worker computed {self.width}"
            )
        from sglang.srt.speculative.draft_worker_common import build_block_pos_offsets, make_draft_block_spec_info

        self._block_pos_offsets = build_block_pos_offsets(length=self.block_size, device=self.device)
        self._draft_block_spec_info = make_draft_block_spec_info(
            draft_token_num=self.block_size, device=self.device
        )
        # The chain-only fast paths of the base class assume verify width == block size.
        self._use_triton_prepare_block = False
        self._use_triton_accept_bonus = False
        from .testing.oracle_drafter import OracleDrafter

        self._oracle = OracleDrafter.from_env()  # test-only, see testing/oracle_drafter.py
        self._debug = DebugLog(server_args.speculative_ddtree_debug_jsonl, self.ps.tp_rank)
        self.shadow = bool(server_args.speculative_ddtree_shadow_linear)
        self.gdn_mode = server_args.speculative_ddtree_gdn_mode
        self._wy_tables = {}  # wy: conv weight address tables, built on the first eager commit
        # --speculative-ddtree-oracle-rate: fraction of steps re-checked by a sequential replay.
        self.oracle_rate = float(server_args.speculative_ddtree_oracle_rate or 0.0)
        self._oracle_rng = random.Random(server_args.random_seed or 0)
        if self.oracle_rate > 0 and self._need_mamba_verify_commit:
            raise NotImplementedError(
                "--speculative-ddtree-oracle-rate is not supported on hybrid (GatedDeltaNet) targets "
                "yet (the replay would advance the linear-attention state); remove the flag."
            )
        self.stats = DDTreeStats(self.budget, self.max_depth, self.device, shadow=self.shadow)  # metrics.py
        # --speculative-ddtree-budget auto (core/budget_policy.py): self.budget is the table's
        # largest budget (it sizes the verify width); each step verifies the policy's choice.
        self.policy = None
        if server_args.speculative_ddtree_step_cost:
            self.policy = BudgetPolicy(StepCostTable.from_json(server_args.speculative_ddtree_step_cost))
            self.stats.policy = self.policy
            logger.info("DDTREE: budget auto over %s (chain fallback: %s), step costs from %s",
                        self.policy.budgets, self.policy.chain, server_args.speculative_ddtree_step_cost)
        # Budget auto with graph verify: a target-verify runtime per width the policy may pick
        # (compat/verify_widths.py), built after the target's own graphs (init_cuda_graphs).
        self._verify_runtimes = {}
        self.prometheus = None  # metrics.PrometheusExport, made on the first export (--enable-metrics)
        self._tree_cuda = None
        if str(self.device).startswith("cuda") and torch.cuda.is_available():
            from .kernels import tree_cuda

            why = tree_cuda.available()
            if why is None:
                self._tree_cuda = tree_cuda
            else:
                logger.warning("DDTREE: CUDA tree kernels unavailable (%s); using the torch path.", why)
        logger.info(
            "DDTREE worker: budget=%d topk=%d max_depth=%d block_size=%d verify_width=%d",
            self.budget, self.topk, self.max_depth, self.block_size, self.width,
        )

    # ------------------------------------------------------------------ drafting

    def _draft_topk(self, draft_hidden: torch.Tensor, lm_head) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-depth top-K log-probs ``[bs, L, K]`` and ids from the draft's hidden states
        ``[bs, L, H]`` through the target's (vocab-parallel) lm_head."""
        bs, L, h = draft_hidden.shape
        weight = lm_head.weight
        shard = lm_head.shard_indices
        n_real = int(shard.org_vocab_end_index - shard.org_vocab_start_index)
        logits = torch.matmul(draft_hidden.reshape(-1, h).to(weight.dtype), weight[:n_real].t())
        keys, lse = local_topk(logits.view(bs, L, n_real), self.topk, int(shard.org_vocab_start_index))
        tp = self.ps.tp_size
        if tp > 1:
            from sglang.srt.distributed import get_tp_group

            group = get_tp_group()
            keys = group.all_gather(keys.unsqueeze(0).contiguous(), dim=0)
            lse = group.all_gather(lse.unsqueeze(0).contiguous(), dim=0)
        else:
            keys, lse = keys.unsqueeze(0), lse.unsqueeze(0)
        return merge_rank_topk(keys, lse, self.topk)

    def _build(self, lp, ids, root, prefix, budget, width, max_siblings=None):
        L = min(self.max_depth, lp.shape[1])
        # The CUDA kernel lays out exactly budget + 1 positions; a verify width padded up to the
        # draft block (budget < block - 1) gets padding positions after it.
        if self._tree_cuda is not None:
            tree, layout = self._tree_cuda.build_tree_and_layout(lp, ids, root, prefix, budget, max_siblings, L)
            return pad_tree(tree, width - 1), pad_layout(layout, width)
        tree = pad_tree(build_tree(lp, ids, budget, max_siblings, L), width - 1)
        return tree, build_verify_layout(tree, root, prefix, lp.shape[1])

    def _step_shape(self, bs: int):
        """``(choice, budget, verify width, max siblings)`` of this step: the fixed budget, or
        the budget policy's choice (the chain: one candidate per depth, DFLASH's block width)."""
        if self.policy is None:
            return self.budget, self.budget, self.width, None
        choice = self.policy.choose(bs)
        if choice == CHAIN:
            return choice, self.max_depth, verify_width(self.max_depth, self.block_size), 1
        return choice, int(choice), verify_width(int(choice), self.block_size), None

    def policy_caps(self) -> Dict[int, Optional[int]]:
        """Per verify width the budget policy can choose, the largest batch size it can choose it
        at (:func:`policy_width_caps`; empty without ``--speculative-ddtree-budget auto``)."""
        if self.policy is None:
            return {}
        return policy_width_caps(self.policy.table, self.max_depth, self.block_size)

    def init_cuda_graphs(self):
        super().init_cuda_graphs()
        caps = self.policy_caps()
        widths = sorted(caps)
        if len(widths) < 2 or not tree_verify_graphs_enabled():
            return
        if max(widths) > self.width:  # the scheduler reserves, and buffers are sized for, self.width
            raise RuntimeError(f"DDTREE budget auto: verify widths {widths} exceed the server's {self.width}")
        self._verify_runtimes = build_verify_runtimes(self.target_worker.model_runner, widths, caps)
        if self._verify_runtimes:
            logger.info("DDTREE budget auto: target verify CUDA graphs for widths %s", sorted(self._verify_runtimes))

    # ------------------------------------------------------------------ decode step

    def init_attention_backends(self):
        super().init_attention_backends()
        if not self._need_mamba_verify_commit:
            return
        if self.gdn_mode == "wy":
            # With the radix cache's state tracking the wy commit writes the tracked state too
            # (wy_commit's track_slots): equal to sglang's per-node state on the H200 (session 8,
            # GPU case ddtree8-qwen35-wy-check-xb-radix).
            logger.info("DDTREE: hybrid target, GatedDeltaNet layers through the snapshot-free tree "
                        "kernels (--speculative-ddtree-gdn-mode wy)")
            return
        linear = getattr(self.target_worker.model_runner.attn_backend, "linear_attn_backend", None)
        logger.info(
            "DDTREE: hybrid target, linear-attention state through sglang's per-node path "
            "(--speculative-ddtree-gdn-mode snapshot); tree mode in the linear backend: %s",
            getattr(linear, "topk", None),
        )

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None) -> GenerationBatchResult:
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch or batch.forward_mode.is_idle():
            return super().forward_batch_generation(batch, on_publish, grammar_barrier)
        if getattr(batch, "return_logprob", False):
            raise ValueError("DDTREE speculative decoding does not support return_logprob yet.")
        if batch.has_grammar:
            raise ValueError("DDTREE speculative decoding does not support structured output yet.")
        if batch.spec_info is None:
            batch.spec_info = DFlashDraftInputV2.create_idle_input(device=self.device)
        draft_input = batch.spec_info
        timer = StepTimer(self._debug.enabled, self.device)
        bs = len(batch.seq_lens)
        device = self.device
        block = self.block_size
        # Fixed budget: the server's verify width; budget auto: this step's (<= the server's,
        # whose KV window the scheduler reserved; a narrower step uses its first positions).
        choice, budget, width, max_siblings = self._step_shape(bs)
        req_to_token = self.model_runner.req_to_token_pool.req_to_token
        prefix_lens = batch.seq_lens

        target_model = self.target_worker.model_runner.model
        embed_module = target_model.get_input_embeddings()
        lm_head = target_model.lm_head

        # The request's KV window for this step: positions prefix .. prefix + width - 1.
        window = assign_extend_cache_locs_func(
            req_pool_indices=batch.req_pool_indices,
            req_to_token=req_to_token,
            start_offset=prefix_lens,
            end_offset=prefix_lens + width,
            batch_size=bs,
            draft_token_num=width,
            device=device,
        ).view(bs, width)

        # --- 1) DFlash draft block: [bonus, MASK x (block - 1)] at positions prefix + j.
        block_ids = torch.full((bs, block), int(self._mask_token_id), dtype=torch.long, device=device)
        block_ids[:, 0] = draft_input.bonus_tokens
        block_positions = prefix_lens.unsqueeze(1).long() + self._block_pos_offsets
        draft_seq_lens_cpu = (
            batch.seq_lens_cpu + block if batch.seq_lens_cpu is not None else None
        )
        draft_fb = ForwardBatch(
            forward_mode=ForwardMode.TARGET_VERIFY,
            batch_size=bs,
            input_ids=block_ids.flatten(),
            req_pool_indices=batch.req_pool_indices,
            seq_lens=prefix_lens,
            out_cache_loc=window[:, :block].reshape(-1).contiguous(),
            seq_lens_sum=int(draft_seq_lens_cpu.sum()) if draft_seq_lens_cpu is not None else int(prefix_lens.sum()) + bs * block,
            seq_lens_cpu=draft_seq_lens_cpu,
            positions=block_positions.reshape(-1),
            input_embeds=embed_module(block_ids).view(bs * block, -1),
            spec_algorithm=SpeculativeAlgorithm.DFLASH,
            spec_info=self._draft_block_spec_info,
            capture_hidden_mode=CaptureHiddenMode.NULL,
        )
        with timer.phase("draft"), torch.inference_mode():
            draft_out = self.draft_model_runner.forward(draft_fb)
            draft_hidden = draft_out.logits_output.hidden_states.view(bs, block, -1)[:, 1:, :]
            lp, ids = self._draft_topk(draft_hidden, lm_head)
        if self._oracle is not None:
            vocab = int(lm_head.shard_indices.org_vocab_end_index)
            lp, ids = self._oracle.topk(batch.reqs, lp.shape[1], self.topk, vocab, device, prefix_lens)

        # --- 2) Tree and verify layout.
        root = draft_input.bonus_tokens.long()
        with timer.phase("tree"):
            tree, layout = self._build(lp, ids, root, prefix_lens.long(), budget, width, max_siblings)

        # --- 3) Target verify over the tree.
        verify_input = DDTreeVerifyInput(
            draft_token=layout.tokens.reshape(-1),
            positions=layout.positions.reshape(-1),
            draft_token_num=width,
            custom_mask=self._verify_mask(layout, prefix_lens, batch),
            capture_hidden_mode=CaptureHiddenMode.FULL,
        )
        snapshot = self._need_mamba_verify_commit and self.gdn_mode != "wy"
        if snapshot or (self._need_mamba_verify_commit and wy_check_enabled()):
            # (The wy cross-check also runs sglang's per-node verify: it needs the links.)
            verify_input.retrieve_next_token = layout.first_child.contiguous()
            verify_input.retrieve_next_sibling = layout.next_sibling.contiguous()
        if self._need_mamba_verify_commit and not snapshot:
            # The tree builder's depth limit bounds every path (fewer squarings in the solve).
            verify_input.ddtree_wy = WyVerifyState.from_layout(layout, tables=self._wy_tables,
                                                               max_depth=self.max_depth)
        seq_lens_pre_verify = prefix_lens.clone() if self._need_mamba_verify_commit else None
        if self._need_mamba_verify_commit:
            prepare_state_tracking(batch)
        target_out = self._target_verify(batch, verify_input, window.reshape(-1).contiguous(), width, timer)
        logits_output = target_out.logits_output
        self.stats.verify_graph_steps += bool(target_out.can_run_cuda_graph)
        logits = logits_output.next_token_logits.view(bs, width, -1)

        # --- 4) Acceptance.
        with timer.phase("accept"):
            target = self._target_tokens(logits, batch)
            acc = self._walk(layout, target, lp.shape[1])
        if self.oracle_rate > 0 and self._oracle_rng.random() < self.oracle_rate:
            self._oracle_replay(batch, prefix_lens, root, acc, width)
        commit_lens = (acc.accept_len + 1).to(torch.int32)
        self.stats.record(acc.accept_len, tree.depth)
        bonus = acc.new_tokens.gather(1, acc.accept_len.unsqueeze(1)).squeeze(1)
        shadow = None
        if self.shadow or (self.policy is not None and self.policy.chain and choice != CHAIN):
            node_rank = torch.cat([torch.zeros_like(tree.rank[:, :1]), tree.rank], 1)
            shadow = shadow_chain_accept(acc.accepted, acc.accept_len, node_rank, ids[:, :, 0], bonus, lp.shape[1])
            if self.shadow:
                self.stats.record_shadow(*shadow)
        if self.policy is not None:
            self.policy.record(choice, acc.accepted, acc.accept_len, chain_accept=None if shadow is None else shadow[0])
            self.stats.record_choice(choice)
        if snapshot:
            self._commit_linear_state(batch, acc, seq_lens_pre_verify, commit_lens, width)
        elif self._need_mamba_verify_commit:
            ith = self._track_path_index(batch, seq_lens_pre_verify, commit_lens)
            if ith is None:
                wy_commit(verify_input.ddtree_wy, acc.accepted, acc.accept_len)
            else:
                wy_commit(verify_input.ddtree_wy, acc.accepted, acc.accept_len,
                          track_slots=batch.mamba_track_indices[: ith.shape[0]], track_at=ith)
        out_tokens = torch.zeros((bs, width), dtype=torch.int64, device=device)
        out_tokens[:, : acc.new_tokens.shape[1]] = acc.new_tokens.clamp(min=0)

        # --- 5) Commit: permute the KV window so the accepted path comes first.
        perm = path_first_permutation(acc.accepted, width)
        new_window = window.gather(1, perm)
        cols = prefix_lens.long().unsqueeze(1) + torch.arange(width, device=device)
        req_to_token[batch.req_pool_indices.long().unsqueeze(1), cols] = new_window.to(req_to_token.dtype)

        new_seq_lens = prefix_lens + commit_lens.to(prefix_lens.dtype)
        if on_publish is not None:
            on_publish(new_seq_lens)

        # Drafter context: target hidden features of the accepted nodes, in accepted order.
        hidden = logits_output.hidden_states.view(bs, width, -1)
        n_path = acc.accepted.shape[1]
        path_hidden = hidden.gather(1, acc.accepted.clamp(min=0).unsqueeze(-1).expand(bs, n_path, hidden.shape[-1]))
        path_slots = new_window[:, :n_path].contiguous()
        path_positions = prefix_lens.long().unsqueeze(1) + torch.arange(n_path, device=device)
        self._append_target_hidden_to_draft_kv_by_loc(
            target_hidden=path_hidden.reshape(-1, hidden.shape[-1]),
            cache_loc=path_slots.reshape(-1),
            positions=path_positions.reshape(-1),
            cache_loc_2d=path_slots,
            commit_lens=commit_lens,
        )
        logits_output.hidden_states = None
        if self._debug.enabled:
            self._debug.write(batch.reqs, prefix_lens, tree, acc.accepted, acc.accept_len, acc.new_tokens, timer.ms,
                              shadow=shadow)

        return GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=out_tokens.reshape(-1),
            accept_lens=commit_lens,
            can_run_cuda_graph=target_out.can_run_cuda_graph,
            next_draft_input=self._make_next_draft_input_decode(bonus_tokens=bonus, new_seq_lens=new_seq_lens),
            speculative_num_draft_tokens=width,
            new_seq_lens=new_seq_lens,
        )

    # ------------------------------------------------------------------ helpers

    def _commit_linear_state(self, batch, acc, seq_lens_pre_verify, commit_lens, width) -> None:
        """Hybrid targets: copy the last accepted node's per-node linear-attention state
        (conv window + recurrent state, kept by sglang's tree verify) into the request's state
        slot. ``acc.accepted[b, t]`` is the verify position of the t-th token of the accepted
        path, so the chain's "step index" becomes a tree position here."""
        # The backend that ran this verify: sglang's commit reads the slots from its metadata.
        rt = self._verify_runtimes.get(int(width))
        attn_backend = rt.attn_backend if rt is not None else self.target_worker.model_runner.attn_backend
        last_node = acc.accepted.gather(1, acc.accept_len.long().unsqueeze(1)).squeeze(1)
        steps_to_track = None
        ith = self._track_path_index(batch, seq_lens_pre_verify, commit_lens)
        if ith is not None:  # sglang's per-node scratch is indexed by verify position
            node = acc.accepted.gather(1, ith.clamp(0, acc.accepted.shape[1] - 1).unsqueeze(1)).squeeze(1).long()
            steps_to_track = torch.where(ith >= 0, node, torch.full_like(node, -1))
        attn_backend.update_mamba_state_after_mtp_verify(
            last_correct_step_indices=last_node.long(),
            mamba_track_indices=batch.mamba_track_indices,
            mamba_steps_to_track=steps_to_track,
            model=self.target_worker.model_runner.model,
            req_pool_indices=batch.req_pool_indices[: commit_lens.shape[0]],
        )

    @staticmethod
    def _track_path_index(batch, seq_lens_pre_verify, commit_lens) -> Optional[torch.Tensor]:
        """Prefix-cache state tracking (sglang's mamba extra buffer): ``[bs]`` the index on the
        accepted path of the token that lands on a tracking boundary (its state is the one the
        radix cache keeps), -1 where this step crosses none; None when nothing is tracked."""
        if batch.mamba_track_indices is None:
            return None
        from sglang.srt.runtime_context import get_exec

        interval = get_exec().mamba.mamba_track_interval
        new_lens = seq_lens_pre_verify + commit_lens.to(seq_lens_pre_verify.dtype)
        crosses = seq_lens_pre_verify // interval != new_lens // interval
        ith = torch.clamp(new_lens // interval * interval - seq_lens_pre_verify - 1, min=0).long()
        ok = crosses & (ith < commit_lens.long())
        return torch.where(ok, ith, torch.full_like(ith, -1))

    def _oracle_replay(self, batch, prefix_lens, root, acc, width) -> None:
        """Re-check this step (core/oracle_check.py): replay what it committed as a causal
        chain through the target, KV written to scratch slots (the committed cache is not
        touched), and compare the greedy rows. Mismatches are logged per request and counted
        in /server_info (``ddtree.oracle``). One host read per checked step."""
        bs = prefix_lens.shape[0]
        greedy = self._greedy_rows(batch.sampling_info, bs)
        allocator = self.model_runner.token_to_kv_pool_allocator
        scratch = allocator.alloc(bs * width)
        if scratch is None:  # no free KV slots for the replay: skip, counted
            self.stats.oracle_skipped += 1
            return
        saved = (batch.input_ids, batch.spec_info, batch.forward_mode, batch.out_cache_loc)
        try:
            chain = replay_chain(acc.new_tokens, acc.accept_len, width - 1)
            layout = build_verify_layout(chain, root, prefix_lens.long(), width - 1)
            replay = DDTreeVerifyInput(
                draft_token=layout.tokens.reshape(-1), positions=layout.positions.reshape(-1),
                draft_token_num=width, custom_mask=self._verify_mask(layout, prefix_lens, batch),
                capture_hidden_mode=CaptureHiddenMode.NULL,
            )
            with torch.inference_mode():
                out = self._target_verify(batch, replay, scratch, width)
            logits = out.logits_output.next_token_logits
            bad = replay_mismatch(logits.view(bs, width, -1).argmax(-1), acc.new_tokens, acc.accept_len) & greedy
            self.stats.record_oracle(greedy, bad)
            flags = bad.tolist()
            if any(flags):
                logger.error(
                    "DDTREE oracle: the sequential replay disagrees with the tree step for request(s) %s "
                    "(prefix lengths %s, accepted %s)",
                    [getattr(r, "rid", None) for r, f in zip(batch.reqs, flags) if f],
                    [int(x) for x, f in zip(prefix_lens.tolist(), flags) if f],
                    [int(x) for x, f in zip(acc.accept_len.tolist(), flags) if f],
                )
        finally:
            allocator.free(scratch)
            batch.input_ids, batch.spec_info, batch.forward_mode, batch.out_cache_loc = saved

    def _target_verify(self, batch, verify_input, out_cache_loc, width, timer=None):
        """One TARGET_VERIFY forward of ``verify_input`` (``width`` positions per request, KV
        written to ``out_cache_loc``). The scheduler's host lengths are raised by the width for
        the forward's attention metadata and restored. The logits get DFLASH's adjustments
        (penalties, logit bias, custom logit processors; one per request, broadcast over the
        positions)."""
        batch.out_cache_loc = out_cache_loc
        seq_lens_cpu, seq_lens_sum = batch.seq_lens_cpu, batch.seq_lens_sum
        if seq_lens_cpu is not None:
            batch.seq_lens_cpu = seq_lens_cpu + width
            batch.seq_lens_sum = int(batch.seq_lens_cpu.sum())
        # Budget auto: this width's backend and graphs (the preparation picks graph or eager).
        with verify_runtime(self.target_worker.model_runner, self._verify_runtimes, width):
            forward_batch, _ = verify_input.prepare_for_verify(batch, self.target_worker)
            batch.seq_lens_cpu, batch.seq_lens_sum = seq_lens_cpu, seq_lens_sum
            with timer.phase("verify") if timer is not None else contextlib.nullcontext():
                out = self.target_worker.forward_batch_generation(
                    batch=None, forward_batch=forward_batch, is_verify=True, skip_attn_backend_init=True
                )
        apply_dflash_verify_logits_adjustments(
            next_token_logits=out.logits_output.next_token_logits, sampling_info=batch.sampling_info,
            draft_token_num=width,
        )
        return out

    def _greedy_rows(self, info, bs: int) -> torch.Tensor:
        """``[bs]`` bool: requests decoded greedily (sglang encodes them as top_k == 1)."""
        if info is None or info.is_all_greedy:
            return torch.ones(bs, dtype=torch.bool, device=self.device)
        return info.top_ks.view(-1) == 1

    def _verify_mask(self, layout, prefix_lens, batch) -> torch.Tensor:
        # The CPU intel_amx backend reads sglang's QLEN_ONLY layout; GPU backends read the
        # FULL_MASK layout (prefix columns included), sized by the host-known prefix sum.
        if str(self.device).startswith("cpu"):
            return layout.qlen_only_mask()
        total = batch.seq_lens_sum
        if total is None:
            # Overlap scheduling carries no host-side lengths: the DFLASH reservation is a
            # host-known upper bound, else read the exact sum (one host sync).
            reserved = getattr(batch.spec_info, "reserved_seq_lens_sum", None)
            total = int(reserved) if reserved is not None else int(prefix_lens.sum())
        return layout.full_mask(prefix_lens, int(total))

    def _target_tokens(self, logits: torch.Tensor, batch) -> torch.Tensor:
        info = batch.sampling_info
        if info is None or info.is_all_greedy:
            return logits.argmax(-1)
        greedy = self._greedy_rows(info, logits.shape[0])
        temps = torch.where(greedy, 0.0, info.temperatures.view(-1).float())
        # The filters sort the vocabulary per verify position: only when a request asks for them
        # ("no top-k" is a huge top_k).
        return target_tokens(
            logits, temps,
            top_k=info.top_ks.view(-1) if info.need_top_k_sampling else None,
            top_p=info.top_ps.view(-1) if info.need_top_p_sampling else None,
            min_p=info.min_ps.view(-1) if info.need_min_p_sampling else None,
        )

    def _walk(self, layout, target, max_depth):
        if self._tree_cuda is not None:
            return self._tree_cuda.tree_walk(layout, target, max_depth)
        return tree_walk(layout.tokens, layout.parent, layout.depth, target, max_depth)
