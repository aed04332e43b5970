"""``--speculative-ddtree-budget auto`` with the CUDA-graph tree verify: one target-verify
runtime (attention backend + graph runner) per verify width the budget policy can choose.

sglang captures the target's verify graphs for one width per request
(``DecodeCudaGraphRunner.captured_req_width``, from ``--speculative-num-draft-tokens``: for DDTREE
the largest budget's width); a step of another width would fail ``can_run_graph`` and run
eagerly. As sglang's adaptive EAGLE does for its step counts
(``EAGLEWorkerV2.build_adaptive_runtime_state``), each other width gets a fresh target attention
backend (a graph runner sizes the backend's buffers for its width and its graphs point into
them) and a ``DecodeCudaGraphRunner`` of that width, built while the spec config says that width;
the worker swaps them onto the model runner around each verify forward only
(:func:`verify_runtime`), so prefill and everything else keep the model runner's own.

Each width's graphs are captured only for the batch sizes the policy can choose it at
(``core/widths.py``). The widest width is sglang's own runner, captured inside
``ModelRunner.init_cuda_graphs``; :func:`width_capped_capture` (entered by
``compat/graph_init.py`` around that call) caps its batch sizes the same way, sizes sglang's
shared logits buffer for the largest width x batch any width's graphs use, and reserves the
tree GatedDeltaNet workspace's commit inputs for as many positions.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional

from ..core.widths import WidthCaps, capture_bs_for_cap, max_verify_rows
from ..compat import releases
from ..server_args import ddtree_width_caps, eager_verify, is_ddtree, published_drafter_block_size
from . import tree_gdn

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


@contextlib.contextmanager
def capped_decode_bs(graphs, cap: Optional[int]):
    """sglang's decode-graph batch sizes (``graphs``: its ``cuda_graph_config``, whose ``decode``
    ``bs`` and ``max_bs`` are what ``get_batch_sizes_to_capture`` reads) cut to
    :func:`capture_bs_for_cap` for the block."""
    if cap is None:
        yield
        return
    decode = graphs.decode
    own = (decode.bs, decode.max_bs)
    if decode.bs:
        decode.bs = capture_bs_for_cap(decode.bs, cap)
        decode.max_bs = max(decode.bs)
    try:
        yield
    finally:
        decode.bs, decode.max_bs = own


def build_verify_runtimes(model_runner, widths: Iterable[int],
                          caps: Optional[WidthCaps] = None) -> Dict[int, VerifyRuntime]:
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
                    capped_decode_bs(releases.cuda_graph_config(getattr(model_runner, "server_args", None)),
                                     (caps or {}).get(width)):
                backend = model_runner._get_attention_backend(init_new_workspace=True)
                # The capture runs the model with the runner's backend; hooks that look at the
                # model runner's backend (verify_graph.is_hybrid_runner) see the same kind.
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


def target_width_caps(model_runner) -> WidthCaps:
    """Width caps of a DDTREE target with budget auto and verify graphs (empty otherwise: the
    drafter, other algorithms, a fixed budget, eager verifies)."""
    sa = releases.resolved(model_runner.server_args)
    if model_runner.is_draft_worker or not is_ddtree(sa) or eager_verify(sa) or not sa.speculative_ddtree_step_cost:
        return {}
    return ddtree_width_caps(sa, published_drafter_block_size())


@contextlib.contextmanager
def width_capped_capture(model_runner):
    """Around the target's own graph capture under budget auto: its batch sizes capped to its
    width's, one logits buffer for every width's graphs (sglang makes it for the first runner's
    rows and would make a second, larger one for a narrower width captured at more requests),
    and the commit-input storage of the tree GatedDeltaNet workspace made for as many positions.
    Does nothing without budget auto."""
    caps = target_width_caps(model_runner)
    if not caps:
        yield
        return
    graphs = releases.cuda_graph_config(model_runner.server_args)
    decode = graphs.decode
    if not decode.bs:
        yield
        return
    from sglang.srt.model_executor.graph_shared_output import GraphSharedOutput

    rows = max_verify_rows(decode.bs, caps)
    shared = GraphSharedOutput._process_shared
    if shared is None or shared.max_rows < rows:
        GraphSharedOutput._process_shared = GraphSharedOutput(device=model_runner.device, max_rows=rows)
    tree_gdn.workspace().reserve_positions(rows)
    main = int(releases.resolved(model_runner.server_args).speculative_num_draft_tokens)
    with capped_decode_bs(graphs, caps.get(main)):
        yield
