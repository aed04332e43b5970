"""Capturing a step function in a CUDA graph, for GPU tests and benchmarks (needs a CUDA device)."""
from __future__ import annotations

import statistics
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


def replay_ms(graph: torch.cuda.CUDAGraph, reps: int) -> float:
    """Milliseconds per replay of a captured ``graph``: one untimed replay, then the median of
    ``reps`` timed ones."""
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def replay_us(fn: Callable[[], Any], calls: int, reps: int) -> float:
    """Microseconds per call of ``fn``: ``calls`` calls captured in one graph (:func:`capture`),
    the median of ``reps`` timed replays (:func:`replay_ms`) divided by ``calls``."""
    graph, _ = capture(lambda: [fn() for _ in range(calls)])
    return replay_ms(graph, reps) * 1e3 / calls
