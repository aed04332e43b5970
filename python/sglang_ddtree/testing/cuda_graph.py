"""Capturing a step function in a CUDA graph, for GPU tests and benchmarks (needs a CUDA device)."""
from __future__ import annotations

from typing import Any, Callable, Tuple

import torch


def capture(fn: Callable[[], Any]) -> Tuple[torch.cuda.CUDAGraph, Any]:
    """Run ``fn`` once on a side stream (allocations and lazy initialisation happen outside the
    capture), then capture one call of it. Returns ``(graph, output of the captured call)``: the
    output's tensors are the graph's static outputs, rewritten by every ``graph.replay()``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out
