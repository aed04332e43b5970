"""CUDA-graph replay of the DDTREE tree verify, with the tree mask (on by default).

sglang 0.5.17 captures the DFlash-family target-verify graph with ``custom_mask=None`` for the
triton / flashinfer / fa3 backends (``resolve_dflash_verify_mask_policy``: a chain needs no
mask), so the captured attention kernels are the causal ones and a replay would drop a tree's
mask silently. So, for DDTREE (verified on the H200 for the Llama and the hybrid target at
budgets 8/16/32/128, RESULTS.md session 5; ``SGLANG_DDTREE_VERIFY_CUDA_GRAPH=0`` turns it off and
DDTREE verifies run eagerly, ``registration._no_graph_for_tree_verify``):

- the target's capture-time verify input carries the runner's mask buffer (hook below), so the
  captured kernels read a mask, and sglang's replay copies each step's
  ``spec_info.custom_mask`` (our FULL_MASK layout) into the backend's verify-mask buffer;
- DDTREE verifies may replay (the guard lets them through) and ``DDTreeVerifyInput``
  prepares them the way DFLASH's does (``load_batch`` when the graph can run).

``SGLANG_DDTREE_VERIFY_CUDA_GRAPH_NOMASK_CONTROL=1`` keeps sglang's mask-less capture: the
negative control of the GPU test that shows the mask is really applied (it must mismatch).

Hybrid targets in ``--speculative-ddtree-gdn-mode snapshot``: sglang's linear backend in tree
mode (compat/hybrid_tree.py raises its top-k) captures its per-node kernels with static
first-child / next-sibling buffers per batch size and copies each step's links into them before
a replay (as for EAGLE trees), so the replay follows the step's tree.

Hybrid targets in ``--speculative-ddtree-gdn-mode wy``: the GatedDeltaNet layers of the
captured verify run our tree kernels (compat/gdn_wy.py), so the capture-time verify input also
carries a :class:`~sglang_ddtree.compat.gdn_wy.WyVerifyState` whose tree (``parent``,
``anc``) lives in static buffers of the runner (``[max_bs, N]``, ``[max_bs, N, N]``, sliced per
captured batch size). Before each replay (``load_batch``) the step's tree is copied into them,
and the step's state is pointed at what the captured call saved for its commit (``u``, ``G``
and the pre-conv inputs: shared buffers the replay rewrites), so the worker's
``wy_commit`` works unchanged. Padded requests of a replay compute on whatever tree their rows
hold (valid trees); their slot is sglang's PAD_SLOT_ID (-1), which the verify kernels read as
slot 0 (read-only; before session 11 they read the memory before the pool, an illegal address
at 64 requests on the H200); the commit touches real requests only.
"""

from __future__ import annotations

import copy
import os

GRAPH_ENV = "SGLANG_DDTREE_VERIFY_CUDA_GRAPH"
NOMASK_CONTROL_ENV = "SGLANG_DDTREE_VERIFY_CUDA_GRAPH_NOMASK_CONTROL"
_TARGET = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner.get_spec_info"


def tree_verify_graphs_enabled() -> bool:
    """On unless ``SGLANG_DDTREE_VERIFY_CUDA_GRAPH=0`` (``--disable-cuda-graph`` turns off every
    graph, this one included)."""
    return os.environ.get(GRAPH_ENV, "1") != "0"


_LOAD = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner.load_batch"


def _capture_with_mask(result, self, num_tokens, *args, **kwargs):
    from ..server_args import is_ddtree_server
    from .wy_pool import wy_server

    if (not tree_verify_graphs_enabled() or self.model_runner.is_draft_worker or result is None
            or not is_ddtree_server()):
        return result
    result = copy.copy(result)
    if getattr(result, "custom_mask", None) is None and os.environ.get(NOMASK_CONTROL_ENV) != "1":
        result.custom_mask = self.buffers.custom_mask
    if wy_server() and _is_hybrid(self.model_runner):
        width = int(self.captured_req_width)
        result.ddtree_wy = static_wy_state(self, num_tokens // width, width)
    return result


def _is_hybrid(model_runner) -> bool:
    return getattr(getattr(model_runner, "attn_backend", None), "linear_attn_backend", None) is not None


def static_wy_state(runner, bs: int, width: int):
    """The capture-time tree state of ``runner`` for batch size ``bs`` (created on first use):
    views of one ``[max_bs, width]`` parent / ``[max_bs, width, width]`` ancestor buffer, every
    node its own root until a replay writes a tree, and one per-layer commit-input buffer dict
    shared by every batch size's graph (replays run one at a time), carved from storage shared
    with the model runner's other verify widths."""
    import torch

    from .gdn_wy import WyVerifyState

    holder = getattr(runner, "_ddtree_wy_static", None)
    if holder is None:
        max_bs = int(getattr(runner, "max_bs", bs))
        dev = runner.buffers.input_ids.device
        eye = torch.eye(width, dtype=torch.uint8, device=dev)
        holder = {"parent": torch.full((max_bs, width), -1, dtype=torch.int32, device=dev),
                  "anc": eye.expand(max_bs, width, width).contiguous(), "states": {}, "work": {}, "tables": {},
                  "max_bs": max_bs}
        runner._ddtree_wy_static = holder
    states = holder["states"]
    if bs not in states:
        from ..server_args import published_server_args

        # The tree builder's depth limit (--speculative-ddtree-max-depth, resolved at launch to
        # at most the drafter's block size - 1), the bound the worker's eager verify uses too.
        # The commit inputs' storage is the model runner's: budget auto's graph runners of other
        # widths (compat/verify_widths.py) carve theirs from the same memory.
        storage = runner.model_runner.__dict__.setdefault("_ddtree_wy_work_storage", {})
        states[bs] = WyVerifyState(parent=holder["parent"][:bs], anc=holder["anc"][:bs],
                                   work=holder["work"], work_rows=holder["max_bs"], work_storage=storage,
                                   work_storage_tokens=int(getattr(runner.model_runner,
                                                                   "_ddtree_wy_work_storage_tokens", 0) or 0),
                                   tables=holder["tables"],
                                   max_depth=int(published_server_args().speculative_ddtree_max_depth))
    return states[bs]


def stage_wy_replay(runner, step_wy) -> None:
    """Copy the step's tree into the static state of the graph about to replay (``runner.bs``,
    set by ``load_batch``) and give the step that state's saved commit inputs."""
    holder = getattr(runner, "_ddtree_wy_static", None)
    static = holder["states"].get(int(runner.bs)) if holder is not None else None
    if static is None:
        raise RuntimeError(
            f"DDTREE wy: no tree verify graph captured for batch size {runner.bs} with the wy kernels "
            "(was it captured with SGLANG_DDTREE_VERIFY_CUDA_GRAPH=0, i.e. not captured for DDTREE?)")
    n = step_wy.parent.shape[0]
    static.parent[:n].copy_(step_wy.parent)
    static.anc[:n].copy_(step_wy.anc)
    step_wy.saved = dict(static.saved)  # a copy: the commit clears the step's dict only
    # The commit reads what the replay writes: the shared buffers and the pool it captured.
    step_wy.work, step_wy.work_rows, step_wy.pool_states = static.work, static.work_rows, static.pool_states
    step_wy.tables = static.tables


def _stage_after_load(result, self, forward_batch, *args, **kwargs):
    step_wy = getattr(getattr(forward_batch, "spec_info", None), "ddtree_wy", None)
    if step_wy is not None and not self.model_runner.is_draft_worker:
        stage_wy_replay(self, step_wy)
    return result


def register_verify_graph_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _capture_with_mask, HookType.AFTER)
    HookRegistry.register(_LOAD, _stage_after_load, HookType.AFTER)
