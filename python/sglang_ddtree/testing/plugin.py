"""Test-only hooks, loaded by ``plugin.register`` only when a test variable of ``config.py`` is
set (never in serving): each patches the product narrowly, through sglang's ``HookRegistry``, in
every process the plugin loads in.

- ``SGLANG_DDTREE_TEST_ORACLE``: the worker's draft returns the oracle drafter's top-K
  (``oracle_drafter.py``) after the real draft forward ran;
- ``SGLANG_DDTREE_TEST_RECORD_TRACE``: the trace recording mode (``trace_recording.py``): every
  step commits only its bonus token and writes the drafter's top-K; refused together with the
  oracle drafter;
- ``SGLANG_DDTREE_BENCH_REPLAY``: the benchmark-only replay drafter (``trace_replay.py``): DDTREE
  and DFLASH draft a recorded trace and the target's logits are replaced by the trace's tokens,
  every forward still at full size; refused on real weights and together with the oracle drafter
  or the recording mode;
- ``SGLANG_DDTREE_TEST_NOMASK_CONTROL``: the tree verify graphs are captured without the tree
  mask (the negative control that proves the mask is applied: output must differ);
- ``SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS``: sglang's mamba extra-buffer sets gain architectures
  (``extra_buffer_arch.py``);
- ``SGLANG_DDTREE_TEST_POOL_COUNTS``: ``/server_info`` reports the scheduler's allocator counts
  (``pool_counts.py``);
- ``SGLANG_DDTREE_TEST_FP32_NORMS``: the CUDA forwards of RMSNorm, GemmaRMSNorm and
  RotaryEmbedding take float32 inputs through sglang's native paths, the GatedDeltaNet chunked
  prefill through a float32 torch prefill (``fp32_norms.py``, ``gdn_prefill_fp32.py``);
- ``SGLANG_DDTREE_TEST_FORK_CHILDREN``: CPU test engines fork their children (``fork_children.py``).
  A forked child inherits this process's registration, so with it the oracle drafter, the pool
  counts and the no-mask control are installed whether or not their variable is set, and each
  reads its variable on every call (unset: the original runs).
"""

from __future__ import annotations

import logging

from ..config import (BENCH_REPLAY, TEST_EXTRA_BUFFER_ARCHS, TEST_FORK_CHILDREN, TEST_FP32_NORMS, TEST_NOMASK_CONTROL,
                      TEST_ORACLE, TEST_POOL_COUNTS, TEST_RECORD_TRACE)

logger = logging.getLogger(__name__)


def _oracle_draft(original, self, batch, draft_input, window, prefix_lens, *args, **kwargs):
    from .oracle_drafter import OracleDrafter

    if not TEST_ORACLE.is_set():
        return original(self, batch, draft_input, window, prefix_lens, *args, **kwargs)
    lp, _ = original(self, batch, draft_input, window, prefix_lens, *args, **kwargs)
    if getattr(self, "_test_oracle", None) is None:
        self._test_oracle = OracleDrafter(TEST_ORACLE.get())
    vocab = int(self.target_worker.model_runner.model.lm_head.shard_indices.org_vocab_end_index)
    return self._test_oracle.topk(batch.reqs, lp.shape[1], self.topk, vocab, self.device, prefix_lens)


def _capture_without_mask(original, runner, spec_info, num_tokens):
    out = original(runner, spec_info, num_tokens)
    if TEST_NOMASK_CONTROL.get() and out is not spec_info and out is not None:
        out.custom_mask = None
    return out


def _with_pool_counts(result, self, *args, **kwargs):
    from .pool_counts import pool_counts

    if TEST_POOL_COUNTS.get() and isinstance(getattr(result, "internal_state", None), dict):
        result.internal_state["pool_counts"] = pool_counts(self)
    return result


def register() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    fork = TEST_FORK_CHILDREN.get()
    if fork:
        from . import fork_children

        HookRegistry.register("sglang.srt.entrypoints.engine._set_envs_and_config",
                              fork_children.after_set_envs_and_config, HookType.AFTER)
        fork_children.note_registration()
    if TEST_ORACLE.is_set() or fork:
        HookRegistry.register("sglang_ddtree.worker.DDTreeWorker.draft", _oracle_draft, HookType.AROUND)
        if TEST_ORACLE.is_set():
            logger.warning("sglang-ddtree TEST: oracle drafter from %s", TEST_ORACLE.get())
    if TEST_RECORD_TRACE.is_set():
        if TEST_ORACLE.is_set():
            raise RuntimeError(f"{TEST_RECORD_TRACE.name} and {TEST_ORACLE.name} exclude each other: a trace "
                               "records the real drafter")
        from . import trace_recording as rec

        HookRegistry.register("sglang_ddtree.worker.DDTreeWorker.__init__", rec.refuse_overlap, HookType.AFTER)
        HookRegistry.register("sglang_ddtree.worker.DDTreeWorker.draft", rec.record_draft, HookType.AROUND)
        HookRegistry.register("sglang_ddtree.core.step.verify_to_commit", rec.bonus_only, HookType.AROUND)
        HookRegistry.register("sglang_ddtree.worker.DDTreeWorker._decode_step", rec.write_step, HookType.AFTER)
        logger.warning("sglang-ddtree TEST: trace recording into %s (every step commits its bonus token only)",
                       TEST_RECORD_TRACE.get())
    if BENCH_REPLAY.is_set():
        clash = [v.name for v in (TEST_ORACLE, TEST_RECORD_TRACE) if v.is_set()]
        if clash:
            raise RuntimeError(f"{BENCH_REPLAY.name} excludes {', '.join(clash)}: the replay drafts from its trace")
        from . import trace_replay

        trace_replay.register()
        logger.warning("sglang-ddtree BENCH: replay drafter from %s (dummy weights only)", BENCH_REPLAY.get())
    if TEST_NOMASK_CONTROL.get() or fork:
        HookRegistry.register("sglang_ddtree.engine.verify_graph.capture_spec_info", _capture_without_mask,
                              HookType.AROUND)
    if TEST_NOMASK_CONTROL.get():
        logger.warning("sglang-ddtree TEST: tree verify graphs captured WITHOUT the tree mask")
    if TEST_EXTRA_BUFFER_ARCHS.is_set():
        from .extra_buffer_arch import apply_extra_buffer_archs

        logger.warning("sglang-ddtree TEST: mamba extra_buffer allowed for %s", apply_extra_buffer_archs())
    if TEST_FP32_NORMS.get():
        from . import fp32_norms

        for target, hook in fp32_norms.HOOKS:
            HookRegistry.register(target, hook, HookType.AROUND)
        logger.warning("sglang-ddtree TEST: RMSNorm, GemmaRMSNorm and RotaryEmbedding run float32 inputs through "
                       "their native paths on CUDA, the GatedDeltaNet prefill through a float32 torch prefill")
    if TEST_POOL_COUNTS.get() or fork:
        HookRegistry.register("sglang.srt.managers.scheduler.Scheduler.get_internal_state", _with_pool_counts,
                              HookType.AFTER)
