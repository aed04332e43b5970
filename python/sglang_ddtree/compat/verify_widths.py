"""``--speculative-ddtree-budget auto`` with the CUDA-graph tree verify: one target-verify
runtime (attention backend + graph runner) per verify width the budget policy can choose.

sglang captures the target's verify graphs for one width per request
(``DecodeCudaGraphRunner.captured_req_width``, from ``--speculative-num-draft-tokens``: for
DDTREE the largest budget's width). A step of another width fails ``can_run_graph`` and runs
eagerly: on the H200 at Qwen3.6-27B size, budget auto over {16} + chain took 66 ms per step
where either fixed configuration replayed in 22-23 ms (RESULTS.md session 6).

sglang's adaptive EAGLE meets the same limit for its step counts
(``EAGLEWorkerV2.build_adaptive_runtime_state``): per configuration, a fresh target attention
backend (a graph runner sizes the backend's buffers for its width and its graphs keep pointers
into them, so two widths cannot share one backend) and a ``DecodeCudaGraphRunner`` of that
width, built while the spec config says that width; then both are swapped onto the model runner.
sglang has no seam to do that for another algorithm, so this module builds them the same way
and the worker swaps them in around each verify forward only (:func:`verify_runtime`), so
prefill / extend and everything else keep the model runner's own.

Memory per extra width: the backend's workspace and the graphs (Qwen3.6-27B, bs 1..16, width
17: ~1.9 GB with the wy kernels, measured in the capture log before session 14). The wy commit
inputs are not per width: every width's graphs carve them from the model runner's one storage
(compat/verify_graph.py, ``gdn_wy._carve``).

Each width's graphs are captured only for the batch sizes the policy can choose it at
(``worker.policy_width_caps``: a budget up to the largest concurrency its table row was measured
at, the chain at any): a sweep that measures budget 256 up to 16 requests gets 257-wide graphs up
to 16, not 64 (at 64 requests of Qwen3.6-27B on one GPU those alone would need ~60 GB). The widest
width is sglang's own runner (the server's ``--speculative-num-draft-tokens``), captured inside
``ModelRunner.init_cuda_graphs``; a hook there (compat/graph_init.py, sglang has no
seam for per-runner batch sizes) caps its batch sizes the same way and sizes sglang's shared
logits buffer for the largest width x batch any width's graphs use.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

logger = logging.getLogger(__name__)


@dataclass
class VerifyRuntime:
    """What a target verify of ``width`` positions per request runs on."""

    width: int
    attn_backend: Any
    graph_runner: Any  # the model runner's decode_cuda_graph_runner slot (None: eager)


def captured_width(model_runner) -> Optional[int]:
    runner = getattr(model_runner, "decode_cuda_graph_runner", None)
    width = getattr(runner, "captured_req_width", None)
    return None if width is None else int(width)


def capture_bs_for_cap(bs_list: Iterable[int], cap: Optional[int]) -> List[int]:
    """The decode-graph batch sizes of a width chosen for at most ``cap`` requests: every size up
    to ``cap`` and the smallest above it (a batch between two sizes pads to the larger one); all
    of them without a cap, or when none reaches it."""
    sizes = sorted({int(b) for b in bs_list})
    if cap is None:
        return sizes
    above = [b for b in sizes if b >= cap]
    return [b for b in sizes if b < cap] + above[:1]


def largest_capture_bs(bs_list: Iterable[int], caps: Dict[int, Optional[int]]) -> Dict[int, int]:
    """Per width in ``caps``, the largest decode-graph batch size its graphs are captured for
    (:func:`capture_bs_for_cap`): what the reserve at launch and the shared buffers sized before
    the captures count."""
    return {w: max(capture_bs_for_cap(bs_list, cap)) for w, cap in caps.items()}


@contextlib.contextmanager
def capped_decode_bs(server_args, cap: Optional[int]):
    """sglang's decode-graph batch sizes (``cuda_graph_config.decode``: ``bs`` and ``max_bs``,
    what ``get_batch_sizes_to_capture`` reads) cut to :func:`capture_bs_for_cap` for the block."""
    if cap is None:
        yield
        return
    decode = server_args.cuda_graph_config.decode
    own = (decode.bs, decode.max_bs)
    if decode.bs:
        decode.bs = capture_bs_for_cap(decode.bs, cap)
        decode.max_bs = max(decode.bs)
    try:
        yield
    finally:
        decode.bs, decode.max_bs = own


def build_verify_runtimes(model_runner, widths: Iterable[int],
                          caps: Optional[Dict[int, Optional[int]]] = None) -> Dict[int, VerifyRuntime]:
    """The model runner's own runtime at its captured width, plus one new runtime per other
    width in ``widths``, each captured for the batch sizes up to its cap in ``caps`` (width ->
    largest batch size, None: any). Empty when the model runner has no verify graphs (eager
    verifies take any width on one backend)."""
    from sglang.srt.runtime_context import get_spec

    main = captured_width(model_runner)
    if main is None:
        return {}
    out = {main: VerifyRuntime(main, model_runner.attn_backend, model_runner.decode_cuda_graph_runner)}
    runner_cls = model_runner._decode_cuda_graph_runner_cls()
    for width in sorted({int(w) for w in widths} - {main}, reverse=True):
        t0 = time.perf_counter()
        own_backend, own_flag = model_runner.attn_backend, model_runner.init_new_workspace
        try:
            # Backends read the verify width from the spec config when they are made.
            with get_spec().override(speculative_num_draft_tokens=width), \
                    capped_decode_bs(getattr(model_runner, "server_args", None), (caps or {}).get(width)):
                backend = model_runner._get_attention_backend(init_new_workspace=True)
                # The capture runs the model with the runner's backend; hooks that look at the
                # model runner's backend (verify_graph._is_hybrid) see the same kind.
                model_runner.attn_backend = backend
                graphs = runner_cls(model_runner, attn_backend=backend, speculative_num_draft_tokens=width)
        finally:
            model_runner.attn_backend, model_runner.init_new_workspace = own_backend, own_flag
        if int(getattr(graphs, "captured_req_width", -1)) != width:
            raise RuntimeError(f"DDTREE budget auto: the verify graphs built for width {width} "
                               f"captured width {getattr(graphs, 'captured_req_width', None)}")
        out[width] = VerifyRuntime(width, backend, graphs)
        logger.info("DDTREE budget auto: target verify graphs for width %d captured in %.1f s (batch sizes %s)",
                    width, time.perf_counter() - t0, getattr(graphs, "capture_bs", None))
    return out


@contextlib.contextmanager
def verify_runtime(model_runner, runtimes: Dict[int, VerifyRuntime], width: int):
    """Run the block with ``width``'s runtime on ``model_runner`` (nothing swapped when there are
    no runtimes). A width without one is a bug of the caller: the policy only picks widths the
    worker built for."""
    if not runtimes:
        yield
        return
    rt = runtimes.get(int(width))
    if rt is None:
        raise RuntimeError(f"DDTREE budget auto: no verify runtime for width {width} "
                           f"(built: {sorted(runtimes)})")
    own = (model_runner.attn_backend, model_runner.decode_cuda_graph_runner)
    model_runner.attn_backend, model_runner.decode_cuda_graph_runner = rt.attn_backend, rt.graph_runner
    try:
        yield
    finally:
        model_runner.attn_backend, model_runner.decode_cuda_graph_runner = own


def main_width_caps(model_runner) -> Dict[int, Optional[int]]:
    """Width caps of a DDTREE target with --speculative-ddtree-budget auto and verify graphs
    (empty otherwise: the draft, other algorithms, a fixed budget, eager verifies)."""
    from .verify_graph import tree_verify_graphs_enabled
    from ..server_args import is_ddtree

    sa = model_runner.server_args
    if model_runner.is_draft_worker or not is_ddtree(sa) or not tree_verify_graphs_enabled():
        return {}
    from ..registration import _drafter_block_size
    from ..worker import ddtree_width_caps

    return ddtree_width_caps(sa, _drafter_block_size())


def init_cuda_graphs_with_width_caps(original, self, *args, **kwargs):
    """Part of compat/graph_init.py's hook on ``ModelRunner.init_cuda_graphs``."""
    caps = main_width_caps(self)
    decode = self.server_args.cuda_graph_config.decode
    if not caps or not decode.bs:
        return original(self, *args, **kwargs)
    from sglang.srt.model_executor.graph_shared_output import GraphSharedOutput

    # One logits buffer for every width's graphs (sglang makes it for the main runner's rows and
    # would make a second, larger one for a narrower width captured at more requests).
    rows = max(width * bs for width, bs in largest_capture_bs(decode.bs, caps).items())
    shared = GraphSharedOutput._process_shared
    if shared is None or shared.max_rows < rows:
        GraphSharedOutput._process_shared = GraphSharedOutput(device=self.device, max_rows=rows)
    # The wy commit inputs' storage likewise (verify_graph.py): made on the first capture for that
    # runner's rows, a later width captured at more rows made a second, larger one while the
    # first stayed alive for the graphs that point into it (session 16: 257 x 16 then 129 x 64
    # rows at Qwen3.6-27B, +8.9 GB, and the next width's capture ran out of memory).
    self._ddtree_wy_work_storage_tokens = rows
    main = int(self.server_args.speculative_num_draft_tokens)
    with capped_decode_bs(self.server_args, caps.get(main)):
        return original(self, *args, **kwargs)
