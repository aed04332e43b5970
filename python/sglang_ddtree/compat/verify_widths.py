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
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional

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


def build_verify_runtimes(model_runner, widths: Iterable[int]) -> Dict[int, VerifyRuntime]:
    """The model runner's own runtime at its captured width, plus one new runtime per other
    width in ``widths``. Empty when the model runner has no verify graphs (eager verifies
    take any width on one backend)."""
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
            with get_spec().override(speculative_num_draft_tokens=width):
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
        logger.info("DDTREE budget auto: target verify graphs for width %d captured in %.1f s",
                    width, time.perf_counter() - t0)
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
