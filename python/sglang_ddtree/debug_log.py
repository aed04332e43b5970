"""``--speculative-ddtree-debug-jsonl PATH``: one JSON line per decode step per request.

Each line: request id, step number, committed prefix length, the tree (per node: token,
parent node index or -1 for the root, depth, score), the accepted nodes (tree node indices in
path order, root excluded), accept length, the tokens the step emits (accepted drafts then the
bonus, before any stop/max-tokens truncation by the scheduler), and the step's phase timings
in milliseconds.
Writing reads the step's tensors back to the host (one synchronisation per step), so the
flag is for debugging and analysis, not production serving.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from typing import Dict, Optional

import torch


class StepTimer:
    """The decode step's phases. Enabled (``--speculative-ddtree-debug-jsonl``): wall-clock
    timings, synchronising the device at each boundary. Under the torch profiler (sglang's
    ``/start_profile``), each phase is a ``ddtree.<name>`` range, so a trace attributes the
    device work launched inside it to the phase (``benchmark/ddtree/trace_summary.py``); nothing
    is synchronised then."""

    def __init__(self, enabled: bool, device):
        self.enabled = enabled
        self.cuda = enabled and str(device).startswith("cuda")
        self.ms: Dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        if not self.enabled:
            if torch.autograd.profiler._is_profiler_enabled:
                with torch.profiler.record_function(f"ddtree.{name}"):
                    yield
            else:
                yield
            return
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        yield
        if self.cuda:
            torch.cuda.synchronize()
        self.ms[name] = round((time.perf_counter() - t0) * 1e3, 3)


class DebugLog:
    def __init__(self, path: Optional[str], tp_rank: int = 0):
        # Only one rank writes: every rank computes the same tree.
        self.path = path if (path and tp_rank == 0) else None
        self.step = 0
        if self.path:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)) or ".", exist_ok=True)

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def write(self, reqs, prefix_lens, tree, accepted, accept_len, new_tokens, timings, shadow=None) -> None:
        if not self.path:
            return
        self.step += 1
        depth, parent, token, score = (x.tolist() for x in (tree.depth, tree.parent, tree.token, tree.score))
        acc, alen, new = accepted.tolist(), accept_len.tolist(), new_tokens.tolist()
        prefix = prefix_lens.tolist()
        sh = None if shadow is None else (shadow[0].tolist(), shadow[1].tolist())
        with open(self.path, "a", encoding="utf-8") as f:
            for b, req in enumerate(reqs):
                nodes = [
                    {"token": token[b][i], "parent": parent[b][i], "depth": depth[b][i], "score": score[b][i]}
                    for i in range(len(depth[b]))
                    if depth[b][i] > 0
                ]
                a = alen[b]
                line = {
                    "rid": getattr(req, "rid", None), "step": self.step, "prefix_len": prefix[b],
                    "tree": nodes, "accepted_nodes": [p - 1 for p in acc[b][1 : a + 1]], "accept_len": a,
                    "new_tokens": new[b][: a + 1], "timings_ms": timings,
                }
                if sh is not None:  # --speculative-ddtree-shadow-linear
                    line["shadow_chain_accept_len"], line["shadow_chain_censored"] = sh[0][b], bool(sh[1][b])
                f.write(json.dumps(line) + "\n")
