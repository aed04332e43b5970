"""``--speculative-algorithm DDTREE``: the speculative worker. One decode step, top to bottom:

1. **Draft** the DFlash block ``[bonus, MASK x (block - 1)]`` exactly as DFLASH does, and keep the
   per-depth top-K log-probs ``[bs, L, K]`` (log-softmax over the full vocabulary through the
   target's lm_head, fp32; tensor-parallel: each rank's top-K of its vocabulary shard, gathered).
2. **Tree**: best-first tree of the step's budget and its verify layout ``[bs, W]``,
   ``W = max(budget + 1, block_size)`` (``core.step.draft_to_verify``).
3. **Verify**: one TARGET_VERIFY forward of the target over the tree with the ancestor mask
   (``verify_info.DDTreeVerifyInput.verify``).
4. **Accept**: walk the tree with the target's argmax (T = 0) or its per-node samples (T > 0),
   and plan the KV commit (``core.step.verify_to_commit``).
5. **Commit**: the KV window path first, the hybrid linear state of the path
   (``DDTreeVerifyInput.commit``); then the drafter's context from the path's target hidden
   states, in path order.

Built on sglang's ``DFlashWorkerV2`` (drafter loading, draft KV pool, prefill, the draft-context
KV writer); only the decode step differs.
"""

from __future__ import annotations

import logging
import random

import torch

from sglang.kernels.ops.speculative.cache_locs import assign_extend_cache_locs_func
from sglang.srt.distributed import get_tp_group
from sglang.srt.environ import envs
from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode, compute_position
from sglang.srt.runtime_context import get_exec
from sglang.srt.speculative.dflash_info_v2 import DFlashDraftInputV2
from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2
from sglang.srt.speculative.draft_worker_common import build_block_pos_offsets, make_draft_block_spec_info
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.spec_utils import GrammarTree

from .compat import releases, skinny_linear
from .core.accept import target_tokens
from .core.budget_choice import CHAIN, StepCostTable
from .core.budget_policy import BudgetPolicy, PinnedChoice
from .core.oracle_check import replay_chain, replay_mismatch
from .core.shadow_chain import shadow_chain_accept
from .core.step import draft_to_verify, verify_to_commit
from .core.verify_layout import build_verify_layout
from .core.widths import WidthCaps, policy_width_caps, verify_width
from .debug_log import DebugLog, PhaseEvents, StepTimer, SyncWatch
from .engine import tree_gdn
from .engine.draft_head import DraftTopKHead
from .engine.penalty_state import penalised, state_for
from .engine.verify_widths import build_verify_runtimes
from .kernels import draft_topk, tree_cuda
from .config import BENCH_PIN, STEP_STATS_KERNEL
from .metrics import DDTreeStats
from .server_args import GDN_SNAPSHOT, GDN_WY, check_attention_backends, drafter_block_size, eager_verify
from .verify_info import DDTreeVerifyInput, apply_grammar, output_logprobs, prepare_state_tracking, root_only_layout

logger = logging.getLogger(__name__)


class DDTreeWorker(DFlashWorkerV2):
    """``--speculative-algorithm DDTREE``."""

    def __init__(self, server_args, gpu_id, *args, **kwargs):
        """``args``: what sglang's ``DFlashWorkerV2`` takes after ``gpu_id`` on this release (0.5.17:
        ``ps, nccl_port, target_worker``; 0.5.23: ``nccl_port, target_worker``, by keyword)."""
        super().__init__(server_args, gpu_id, *args, **kwargs)
        server_args = releases.resolved(server_args)
        tp = get_tp_group()
        # DFlashWorkerV2 takes its block size from --speculative-num-draft-tokens, which for
        # DDTREE is the verify width; the drafter's block comes from its own config.
        self.block_size = drafter_block_size(self.draft_model_runner.model_config.hf_config)
        self.budget = int(server_args.speculative_ddtree_budget)
        self.topk = int(server_args.speculative_ddtree_topk)
        self.max_depth = int(server_args.speculative_ddtree_max_depth)
        self.width = verify_width(self.budget, self.block_size)
        self.speculative_num_draft_tokens = self.width
        if int(server_args.speculative_num_draft_tokens) != self.width:
            raise RuntimeError(f"DDTREE verify width mismatch: server args say "
                               f"{server_args.speculative_num_draft_tokens}, worker computed {self.width}")
        self._block_pos_offsets = build_block_pos_offsets(length=self.block_size, device=self.device)
        self._draft_block_spec_info = make_draft_block_spec_info(draft_token_num=self.block_size, device=self.device)
        # The chain-only fast paths of the base class assume verify width == block size.
        self._use_triton_prepare_block = False
        self._use_triton_accept_bonus = False
        # How a hybrid target's GatedDeltaNet layers verify the tree (None: attention only); known
        # once the attention backends exist (init_attention_backends).
        self._gdn_mode = server_args.speculative_ddtree_gdn_mode or GDN_SNAPSHOT
        self.gdn = None
        self._debug = DebugLog(server_args.speculative_ddtree_debug_jsonl, tp.rank_in_group)
        self.shadow = bool(server_args.speculative_ddtree_shadow_linear)
        self.oracle_rate = float(server_args.speculative_ddtree_oracle_rate or 0.0)
        self._penalties = None  # engine.penalty_state.PenaltyState, from the first penalised request
        self._oracle_rng = random.Random(server_args.random_seed or 0)
        self.stats = DDTreeStats(self.budget, self.max_depth, self.device, shadow=self.shadow)
        if PhaseEvents.enabled(self.device):  # developer: device ms per phase in /server_info
            self.stats.phase_events = PhaseEvents()
        if SyncWatch.enabled(self.device):  # developer: host syncs in the step, in /server_info
            self.stats.sync_watch = SyncWatch()
        self.prometheus = None  # metrics.PrometheusExport, made on the first export (--enable-metrics)
        # --speculative-ddtree-budget auto: self.budget is the table's largest budget (it sizes
        # the verify width); each step verifies the policy's choice.
        self.policy = None
        if server_args.speculative_ddtree_step_cost:
            self.policy = BudgetPolicy(StepCostTable.from_json(server_args.speculative_ddtree_step_cost))
            self.stats.policy = self.policy
            logger.info("DDTREE: budget auto over %s (chain fallback: %s), step costs from %s",
                        self.policy.budgets, self.policy.chain, server_args.speculative_ddtree_step_cost)
        # Benchmarks only: every step verifies what a file names (SGLANG_DDTREE_BENCH_PIN).
        self._pin = None
        if BENCH_PIN.get():
            if self.policy is None:
                raise ValueError(f"{BENCH_PIN.name} pins budget auto's choice: it needs "
                                 "--speculative-ddtree-budget auto")
            self._pin = PinnedChoice(BENCH_PIN.get(), self.policy.budgets, self.policy.chain)
            logger.warning("DDTREE benchmark: each step verifies what %s names (%s)", BENCH_PIN.name, self._pin.path)
        # The per-depth top-K head over the target's lm_head; folded into the drafter's CUDA graph
        # in DFLASH's place (_maybe_build_draft_sampler), eager otherwise.
        self._head = DraftTopKHead.from_lm_head(self.target_worker.model_runner.model.lm_head, self.block_size,
                                                self.topk, tp if tp.world_size > 1 else None, skinny_linear.linear)
        # Pages of more than one token: the accepted path's KV moves into place (core/commit_plan.py).
        self._move_kv = int(server_args.page_size or 1) > 1
        self._verify_runtimes = {}  # budget auto with graphs: width -> VerifyRuntime (init_cuda_graphs)
        # The CUDA tree kernels; None: the torch path (CPU, or --speculative-ddtree-allow-slow-kernels).
        allow_slow = bool(server_args.speculative_ddtree_allow_slow_kernels)
        self._tree_cuda = tree_cuda if tree_cuda.serves(self.device, allow_slow) else None
        self._step_stats = self._tree_cuda if STEP_STATS_KERNEL.get() else None  # (SGLANG_DDTREE_STEP_STATS_KERNEL)
        if str(self.device).startswith("cuda"):
            topk_kernel = "fused Triton kernel" if self.topk <= draft_topk.MAX_K else "torch"
            if self._tree_cuda is not None:
                logger.info("DDTREE kernels: tree build + layout + walk CUDA (%s); drafter top-K %s",
                            tree_cuda.origin(), topk_kernel)
            else:
                logger.warning("DDTREE kernels: tree build + layout + walk torch (%s; "
                               "--speculative-ddtree-allow-slow-kernels); drafter top-K %s",
                               tree_cuda.available(), topk_kernel)
        logger.info("DDTREE worker: budget=%d topk=%d max_depth=%d block_size=%d verify_width=%d",
                    self.budget, self.topk, self.max_depth, self.block_size, self.width)

    # ------------------------------------------------------------------ set-up

    def policy_caps(self) -> WidthCaps:
        """Per verify width budget auto can choose, the largest batch size it can choose it at
        (empty without ``--speculative-ddtree-budget auto``)."""
        if self.policy is None:
            return {}
        return policy_width_caps(self.policy.table, self.max_depth, self.block_size)

    def _maybe_build_draft_sampler(self):
        """What sglang's DFLASH folds into the drafter's decode graph (called by its
        ``init_cuda_graphs`` before the capture): DDTREE's top-K head instead of DFLASH's greedy
        argmax, which DDTREE never reads. ``SGLANG_DFLASH_EAGER_DRAFT_SAMPLER=1`` (sglang's
        switch) keeps the head eager."""
        if envs.SGLANG_DFLASH_EAGER_DRAFT_SAMPLER.get():
            logger.info("DDTREE: drafter top-K head kept eager (SGLANG_DFLASH_EAGER_DRAFT_SAMPLER=1)")
            return None
        self._head.allocate(max(get_exec().graph.cuda_graph_config.decode.bs))
        logger.info("DDTREE: drafter top-K head (top-%d over the target's lm_head) folded into the drafter's "
                    "CUDA graph", self.topk)
        return self._head

    def init_cuda_graphs(self):
        super().init_cuda_graphs()
        caps = self.policy_caps()
        widths = sorted(caps)
        if len(widths) < 2 or eager_verify():
            return
        if max(widths) > self.width:  # the scheduler reserves, and buffers are sized for, self.width
            raise RuntimeError(f"DDTREE budget auto: verify widths {widths} exceed the server's {self.width}")
        self._verify_runtimes = build_verify_runtimes(self.target_worker.model_runner, widths, caps)
        if self._verify_runtimes:
            logger.info("DDTREE budget auto: target verify CUDA graphs for widths %s", sorted(self._verify_runtimes))

    def init_attention_backends(self):
        """sglang's, then the hybrid target's GDN mode: DFLASH decides there whether the target
        has linear-attention state to commit after a verify."""
        check_attention_backends(self.target_worker.model_runner.server_args, defaulted=True)
        super().init_attention_backends()
        self.gdn = self._gdn_mode if self._need_mamba_verify_commit else None
        if self.oracle_rate > 0 and self.gdn is not None:
            raise NotImplementedError(
                "--speculative-ddtree-oracle-rate is not supported on hybrid (GatedDeltaNet) targets "
                "yet (the replay would advance the linear-attention state); remove the flag.")
        if self.gdn == GDN_WY:
            logger.info("DDTREE: hybrid target, GatedDeltaNet layers through the snapshot-free tree kernels "
                        "(--speculative-ddtree-gdn-mode wy): verify and conv Triton, state commit %s",
                        "CUDA" if tree_gdn.commit_kernel() == "cuda" else "Triton")
        elif self.gdn == GDN_SNAPSHOT:
            linear = getattr(self.target_worker.model_runner.attn_backend, "linear_attn_backend", None)
            logger.info("DDTREE: hybrid target, linear-attention state through sglang's per-node path "
                        "(--speculative-ddtree-gdn-mode snapshot); tree mode in the linear backend: %s",
                        getattr(linear, "topk", None))

    # ------------------------------------------------------------------ the decode step

    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None, **kwargs) -> GenerationBatchResult:
        # kwargs: 0.5.23's pipeline-parallel proxy tensors (DDTREE refuses pipeline parallelism).
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            return self._prefill(batch, on_publish)
        if batch.forward_mode.is_idle():
            return super().forward_batch_generation(batch, on_publish, grammar_barrier)
        if batch.spec_info is None:
            batch.spec_info = DFlashDraftInputV2.create_idle_input(device=self.device)
        if self.stats.sync_watch is not None:
            with self.stats.sync_watch.watch():
                return self._decode_step(batch, on_publish, grammar_barrier)
        return self._decode_step(batch, on_publish, grammar_barrier)

    def _prefill(self, batch, on_publish) -> GenerationBatchResult:
        """A target extend (prefill, or prefill chunks mixed into a decode batch): the target
        forward capturing the DFlash layers' hidden states (and the logprobs the requests ask
        for), those hidden states appended to the drafter's KV at the new tokens' slots, the
        sampled token the next draft's root. DFLASH's prefill does the same but refuses
        ``return_logprob``."""
        out = self.target_worker.forward_batch_generation(batch, capture_hidden_mode=CaptureHiddenMode.FULL)
        out.new_seq_lens = batch.seq_lens
        if on_publish is not None:
            on_publish(out.new_seq_lens)
        hidden = out.logits_output.hidden_states
        if hidden is None:
            raise RuntimeError("DDTREE: the target's prefill returned no hidden states for the drafter (the "
                               "target model has no DFlash layers to capture configured).")
        if batch.extend_lens is None or batch.prefix_lens is None or batch.out_cache_loc is None:
            raise RuntimeError("DDTREE: an extend batch without extend_lens / prefix_lens / out_cache_loc.")
        new = out.next_token_ids
        positions, _ = compute_position(
            releases.resolved(self.model_runner.server_args).attention_backend,
            torch.tensor(batch.prefix_lens, dtype=torch.int32, device=new.device),
            torch.tensor(batch.extend_lens, dtype=torch.int32, device=new.device), int(sum(batch.extend_lens)))
        # Now, not later: the scheduler may insert the prompt into the radix cache on return.
        self._append_target_hidden_to_draft_kv_by_loc(target_hidden=hidden, cache_loc=batch.out_cache_loc,
                                                      positions=positions)
        out.logits_output.hidden_states = None  # (not copied to the host under overlap)
        out.next_draft_input = self._make_next_draft_input_prefill(bonus_tokens=new, seq_lens=batch.seq_lens)
        # Penalties: the admitted requests' rows; in a batch mixing prefill chunks into decoding,
        # a request that already decodes keeps its own.
        mixed = not batch.forward_mode.is_extend()
        fresh = [i for i, r in enumerate(batch.reqs) if not (mixed and r.output_ids)]
        admitted = [batch.reqs[i] for i in fresh]
        self._penalties = state_for(self._penalties, admitted,
                                    self.target_worker.model_runner.req_to_token_pool.req_to_token.shape[0],
                                    self.target_worker.model_runner.model_config.vocab_size, self.device)
        if self._penalties is not None and fresh:
            rows = torch.tensor(fresh, dtype=torch.long).to(self.device, non_blocking=True)
            self._penalties.admit(admitted, batch.req_pool_indices[rows], new[rows])
        return out

    def _record_step(self, choice, pinned, tree, acc, chain_tokens, bonus, L):
        """The step's counters (``self.stats``), the DFLASH chain's shadow accept length (for
        ``--speculative-ddtree-shadow-linear`` and for budget auto's chain estimate on a tree
        step) and budget auto's profile: one launch with the CUDA kernels under
        ``SGLANG_DDTREE_STEP_STATS_KERNEL`` (``tree_cuda.step_stats``), else their torch forms.
        ``chain_tokens [bs, L]`` the rank-0 draft per depth, ``bonus [bs]``. Returns the shadow
        ``(chain_accept [bs], censored [bs])`` or None (not computed this step)."""
        policy = self.policy if self.policy is not None and not pinned else None
        bs = acc.accept_len.shape[0]
        want = self.shadow or (policy is not None and policy.chain and choice != CHAIN)
        if self.policy is not None:
            self.stats.record_choice(choice)
        if self._step_stats is not None:
            sums = policy.begin_record(choice, bs, acc.accepted.device, want) if policy is not None and bs else None
            shadow = self._step_stats.step_stats(acc.accepted, acc.accept_len, tree.depth, self.stats,
                                                (tree.rank, chain_tokens, bonus, L) if want else None, sums)
            if sums is not None:
                policy.end_record(bs)
            return shadow
        self.stats.record(acc.accept_len, tree.depth)
        shadow = None
        if want:
            node_rank = torch.cat([torch.zeros_like(tree.rank[:, :1]), tree.rank], 1)
            shadow = shadow_chain_accept(acc.accepted, acc.accept_len, node_rank, chain_tokens, bonus, L)
            if self.shadow:
                self.stats.record_shadow(*shadow)
        if policy is not None:
            policy.record(choice, acc.accepted, acc.accept_len, chain_accept=None if shadow is None else shadow[0])
        return shadow

    def _decode_step(self, batch, on_publish, grammar_barrier=None) -> GenerationBatchResult:
        draft_input = batch.spec_info
        phases = self.stats.phase_events
        events = phases.new_step() if phases is not None else None
        timer = StepTimer(self._debug.enabled, self.device, events)
        bs = len(batch.seq_lens)
        prefix_lens = batch.seq_lens
        req_to_token = self.model_runner.req_to_token_pool.req_to_token
        # Fixed budget: the server's verify width; budget auto: this step's (at most the server's,
        # whose KV window the scheduler reserved; a narrower step uses its first positions).
        # (pinned: a benchmark's pinned step verifies as a fixed-budget engine's: no shadow, no profile)
        choice, budget, width, max_siblings, pinned = self._step_shape(bs)
        window = assign_extend_cache_locs_func(
            req_pool_indices=batch.req_pool_indices, req_to_token=req_to_token, start_offset=prefix_lens,
            end_offset=prefix_lens + width, batch_size=bs, draft_token_num=width, device=self.device,
        ).view(bs, width)

        # 1) Draft: per-depth top-K.
        with torch.inference_mode():
            lp, ids = self.draft(batch, draft_input, window, prefix_lens, timer)
        L = lp.shape[1]
        root = draft_input.bonus_tokens.long()

        # 2) Tree and verify layout.
        with timer.phase("tree"):
            tree, layout = draft_to_verify(lp, ids, root, prefix_lens.long(), budget, width, max_siblings,
                                           self.max_depth, fast=self._tree_cuda)

        # Structured output: the tree goes to the host now (its copy overlaps the verify launch);
        # the grammar's mask of every node is built while the verify runs.
        grammar_tree = None
        if batch.has_grammar:
            grammar_tree = GrammarTree.from_device(layout.first_child, layout.next_sibling, layout.tokens)
            # (the verify's logit adjustments would apply a mask left from the extend to every row)
            batch.sampling_info.grammar_mask = None

        # 3) Verify.
        verify_input = DDTreeVerifyInput.build(layout, prefix_lens, batch, self.gdn)
        pre_verify_lens = prefix_lens.clone() if self.gdn is not None else None
        if self.gdn is not None:
            prepare_state_tracking(batch)
        target_out = verify_input.verify(batch, self.target_worker, window.reshape(-1).contiguous(),
                                         self._verify_runtimes, timer)
        logits_output = target_out.logits_output
        self.stats.verify_graph_steps += bool(target_out.can_run_cuda_graph)
        root_only = None  # grammar requests that commit one token this step (apply_grammar)
        if grammar_tree is not None:
            root_only = apply_grammar(batch, grammar_tree, logits_output.next_token_logits, grammar_barrier)
        penalties = self._penalties if self._penalties is not None and any(penalised(r) for r in batch.reqs) else None
        if penalties is not None:  # every node's penalties, from its path (core/path_penalties.py)
            penalties.apply(logits_output.next_token_logits.view(bs, width, -1), batch.req_pool_indices,
                            layout.tokens, layout.ancestor_mask, layout.depth)

        # 4) Accept.
        with timer.phase("accept"):
            target = self._target_tokens(logits_output.next_token_logits.view(bs, width, -1), batch)
            walk_layout = layout if root_only is None else root_only_layout(layout, root_only)
            acc, plan = verify_to_commit(walk_layout, target, L, window, fast=self._tree_cuda, move_kv=self._move_kv)
            if batch.return_logprob:
                output_logprobs(batch, logits_output, target, acc.accepted)
        if self.oracle_rate > 0 and self._oracle_rng.random() < self.oracle_rate:
            self._oracle_replay(batch, prefix_lens, root, acc, width)
        shadow = self._record_step(choice, pinned, tree, acc, ids[:, :, 0], plan.bonus, L)

        # 5) Commit, then the drafter's context: the path's target hidden states, in path order.
        with timer.phase("commit"):
            verify_input.commit(batch, plan, acc.accepted, acc.accept_len, req_to_token, prefix_lens,
                                pre_verify_lens, self.target_worker, self.gdn, self._verify_runtimes)
        if penalties is not None:  # the committed tokens, in output order
            penalties.commit(batch.req_pool_indices, plan.out_tokens[:, : plan.path_index.shape[1]], plan.commit_lens)
        new_seq_lens = prefix_lens + plan.commit_lens.to(prefix_lens.dtype)
        if on_publish is not None:
            on_publish(new_seq_lens)
        with timer.phase("context"):
            hidden = logits_output.hidden_states.view(bs, width, -1)
            P = plan.path_index.shape[1]
            path_hidden = hidden.gather(1, plan.path_index.unsqueeze(-1).expand(bs, P, hidden.shape[-1]))
            path_positions = prefix_lens.long().unsqueeze(1) + torch.arange(P, device=self.device)
            self._append_target_hidden_to_draft_kv_by_loc(
                target_hidden=path_hidden.reshape(-1, hidden.shape[-1]), cache_loc=plan.path_slots.reshape(-1),
                positions=path_positions.reshape(-1), cache_loc_2d=plan.path_slots, commit_lens=plan.commit_lens,
            )
        logits_output.hidden_states = None
        if self._debug.enabled:
            self._debug.write(batch.reqs, prefix_lens, tree, acc.accepted, acc.accept_len, acc.new_tokens, timer.ms,
                              shadow=shadow)
        if events is not None:
            phases.end_step(events)
        return GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=plan.out_tokens.reshape(-1),
            accept_lens=plan.commit_lens,
            can_run_cuda_graph=target_out.can_run_cuda_graph,
            next_draft_input=self._make_next_draft_input_decode(bonus_tokens=plan.bonus, new_seq_lens=new_seq_lens),
            speculative_num_draft_tokens=width,
            new_seq_lens=new_seq_lens,
        )

    def draft(self, batch, draft_input, window: torch.Tensor, prefix_lens: torch.Tensor, timer: StepTimer):
        """The DFlash block ``[bonus, MASK x (block - 1)]`` at positions ``prefix + j`` through the
        drafter, its KV written to the first ``block`` slots of ``window [bs, W]``; returns the
        per-depth top-K ``(lp [bs, L, K] fp32 descending, ids [bs, L, K])``, ``L = block - 1``."""
        bs, block = window.shape[0], self.block_size
        target_model = self.target_worker.model_runner.model
        block_ids = torch.full((bs, block), int(self._mask_token_id), dtype=torch.long, device=self.device)
        block_ids[:, 0] = draft_input.bonus_tokens
        seq_lens_cpu, seq_lens_sum = self._draft_host_lens(batch, draft_input, prefix_lens, block)
        draft_fb = ForwardBatch(
            forward_mode=ForwardMode.TARGET_VERIFY,
            batch_size=bs,
            input_ids=block_ids.flatten(),
            req_pool_indices=batch.req_pool_indices,
            seq_lens=prefix_lens,
            out_cache_loc=window[:, :block].reshape(-1).contiguous(),
            seq_lens_sum=seq_lens_sum,
            seq_lens_cpu=seq_lens_cpu,
            positions=(prefix_lens.unsqueeze(1).long() + self._block_pos_offsets).reshape(-1),
            input_embeds=target_model.get_input_embeddings()(block_ids).view(bs * block, -1),
            spec_algorithm=SpeculativeAlgorithm.DFLASH,
            spec_info=self._draft_block_spec_info,
            capture_hidden_mode=CaptureHiddenMode.NULL,
        )
        with timer.phase("draft"):
            draft_out = self.draft_model_runner.forward(draft_fb)
        with timer.phase("topk"):
            if draft_out.can_run_graph and self._draft_sampler is self._head:
                return self._head.graph_result(bs)  # computed inside the drafter's graph
            return self._head.topk(draft_out.logits_output.hidden_states)

    @staticmethod
    def _draft_host_lens(batch, draft_input, prefix_lens: torch.Tensor, block: int):
        """Host-side lengths for the drafter's block forward, ``(seq_lens_cpu [bs] or None,
        seq_lens_sum)``: the committed lengths plus the block when the scheduler has them;
        under overlap scheduling (no host lengths) DFLASH's reservation, a host-known upper
        bound (``>= prefix + 2 W``); else the exact sum, read from the device (one host sync)."""
        if batch.seq_lens_cpu is not None:
            lens = batch.seq_lens_cpu + block
            return lens, int(lens.sum())
        reserved = getattr(draft_input, "reserved_seq_lens_cpu", None)
        if reserved is not None:
            return reserved, int(draft_input.reserved_seq_lens_sum)
        return None, int(prefix_lens.sum()) + prefix_lens.shape[0] * block

    def _step_shape(self, bs: int):
        """``(choice, budget, verify width, max siblings, pinned)`` of this step: the fixed budget,
        or the budget policy's choice (the chain: one candidate per depth, at DFLASH's block width),
        or the choice a benchmark's pin file names (``pinned`` True)."""
        if self.policy is None:
            return self.budget, self.budget, self.width, None, False
        pin = self._pin.get() if self._pin is not None else None
        choice = self.policy.choose(bs) if pin is None else pin
        if choice == CHAIN:
            return choice, self.max_depth, verify_width(self.max_depth, self.block_size), 1, pin is not None
        return choice, int(choice), verify_width(int(choice), self.block_size), None, pin is not None

    def _target_tokens(self, logits: torch.Tensor, batch) -> torch.Tensor:
        """``[bs, W]`` the target's token per verify position: argmax for greedy requests, one
        sample from the request's filtered distribution otherwise."""
        info = batch.sampling_info
        if info is None or info.is_all_greedy:
            return logits.argmax(-1)
        greedy = self._greedy_rows(info, logits.shape[0])
        temps = torch.where(greedy, 0.0, info.temperatures.view(-1).float())
        # The filters sort the vocabulary per verify position: only when a request asks for them.
        return target_tokens(
            logits, temps,
            top_k=info.top_ks.view(-1) if info.need_top_k_sampling else None,
            top_p=info.top_ps.view(-1) if info.need_top_p_sampling else None,
            min_p=info.min_ps.view(-1) if info.need_min_p_sampling else None,
        )

    def _greedy_rows(self, info, bs: int) -> torch.Tensor:
        """``[bs]`` bool: requests decoded greedily (sglang encodes them as top_k == 1)."""
        if info is None or info.is_all_greedy:
            return torch.ones(bs, dtype=torch.bool, device=self.device)
        return info.top_ks.view(-1) == 1

    # ------------------------------------------------------------------ --speculative-ddtree-oracle-rate

    def _oracle_replay(self, batch, prefix_lens, root, acc, width) -> None:
        """Re-check this step (``core/oracle_check.py``): replay what it committed as a causal
        chain through the target, KV written to scratch slots (the committed cache is not
        touched), and compare the greedy rows. Mismatches are logged per request and counted in
        /server_info (``ddtree.oracle``). One host read per checked step."""
        bs = prefix_lens.shape[0]
        greedy = self._greedy_rows(batch.sampling_info, bs)
        allocator = self.model_runner.token_to_kv_pool_allocator
        scratch = allocator.alloc(bs * width)
        if scratch is None:  # no free KV slots for the replay: skipped, counted
            self.stats.oracle_skipped += 1
            return
        saved = (batch.input_ids, batch.spec_info, batch.forward_mode, batch.out_cache_loc)
        try:
            chain = replay_chain(acc.new_tokens, acc.accept_len, width - 1)
            layout = build_verify_layout(chain, root, prefix_lens.long(), width - 1)
            replay = DDTreeVerifyInput.build(layout, prefix_lens, batch, gdn=None, capture_hidden=False)
            with torch.inference_mode():
                out = replay.verify(batch, self.target_worker, scratch, self._verify_runtimes)
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
