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
import logging
import os
import time
import traceback
import warnings
from collections import deque
from contextlib import contextmanager
from typing import Deque, Dict, List, Optional, Tuple

import torch

from .config import PHASE_TIMING, SYNC_CHECK

logger = logging.getLogger(__name__)


class StepTimer:
    """The decode step's phases. Enabled (``--speculative-ddtree-debug-jsonl``): wall-clock
    timings, synchronising the device at each boundary. With ``events`` (a list, from
    :meth:`PhaseEvents.new_step`): a CUDA event pair around each phase on the current stream, never
    waited for. Under the torch profiler (sglang's ``/start_profile``), each phase is a
    ``ddtree.<name>`` range, so a trace attributes the device work launched inside it to the phase
    (``benchmark/ddtree/trace_summary.py``)."""

    def __init__(self, enabled: bool, device, events: Optional[List] = None):
        self.enabled = enabled
        self.cuda = enabled and str(device).startswith("cuda")
        self.ms: Dict[str, float] = {}
        self.events = events

    @contextmanager
    def phase(self, name: str):
        start = None
        if self.events is not None:
            t_host = time.perf_counter()
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        if self.enabled:
            if self.cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        if torch.autograd.profiler._is_profiler_enabled:
            with torch.profiler.record_function(f"ddtree.{name}"):
                yield
        else:
            yield
        if self.enabled:
            if self.cuda:
                torch.cuda.synchronize()
            self.ms[name] = round((time.perf_counter() - t0) * 1e3, 3)
        if start is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.events.append((name, start, end, (time.perf_counter() - t_host) * 1e3))


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


class PhaseEvents:
    """Device time per decode-step phase, from CUDA events and never a synchronisation on the
    decode path (``SGLANG_DDTREE_PHASE_TIMING=1``, a developer switch; CUDA only). Each step records
    ``step`` (its whole span) and its phases; a step is folded into the sums once its last event
    has completed (checked without waiting), or when :meth:`snapshot` waits for all of them.
    ``gap`` is the device time between one step's end and the next one's start (the scheduler's
    work between steps, and the GPU idle while it runs); ``other`` is the step's span outside its
    phases. Beside each device time, ``host_<name>`` is the host (Python) time spent issuing it,
    ``host_step`` the worker's whole step and ``host_gap`` the host time between steps (the
    scheduler): a step whose host time exceeds its device time leaves the GPU idle."""

    MAX_PENDING = 4096

    def __init__(self):
        self.pending: Deque[List[Tuple[str, torch.cuda.Event, torch.cuda.Event]]] = deque()
        self.ms_sum: Dict[str, float] = {}
        self.steps = 0
        self._last_end: Optional[torch.cuda.Event] = None
        self._last_end_host: Optional[float] = None

    @staticmethod
    def enabled(device) -> bool:
        return bool(PHASE_TIMING.get()) and str(device).startswith("cuda") and torch.cuda.is_available()

    def new_step(self) -> List:
        """The event list of a step that starts now (a ``step`` start event is recorded)."""
        now = time.perf_counter()
        gap = None if self._last_end_host is None else (now - self._last_end_host) * 1e3
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        events: List = [("step", start, None, now, gap)]
        self.pending.append(events)
        self._fold(wait=False)
        return events

    def end_step(self, events: List) -> None:
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        _, start, _, t0, gap = events[0]
        self._last_end_host = time.perf_counter()
        events[0] = ("step", start, end, (self._last_end_host - t0) * 1e3, gap)

    def _fold(self, wait: bool) -> None:
        while self.pending:
            events = self.pending[0]
            end = events[0][2]
            if end is None:  # the step in flight
                if not wait:
                    return
                break
            if not wait and not end.query() and len(self.pending) < self.MAX_PENDING:
                return
            end.synchronize()
            self.pending.popleft()
            _, start, end, host_step, host_gap = events[0]
            span = start.elapsed_time(end)
            inside = 0.0
            for name, a, b, host in events[1:]:
                ms = a.elapsed_time(b)
                inside += ms
                self._add(name, ms)
                self._add(f"host_{name}", host)
            self._add("other", max(0.0, span - inside))
            self._add("host_step", host_step)
            if host_gap is not None:
                self._add("host_gap", host_gap)
            if self._last_end is not None:
                self._add("gap", self._last_end.elapsed_time(start))
            self._last_end = end
            self.steps += 1

    def _add(self, name: str, ms: float) -> None:
        self.ms_sum[name] = self.ms_sum.get(name, 0.0) + ms

    def snapshot(self) -> dict:
        """``{"steps": n, "ms_sum": {phase: ms}, "ms_per_step": {phase: ms}}`` over the completed
        steps (waits for the recorded ones: a read, not the decode path)."""
        self._fold(wait=True)
        n = self.steps
        return {"steps": n, "ms_sum": {k: round(v, 4) for k, v in self.ms_sum.items()},
                "ms_per_step": {k: round(v / n, 4) for k, v in self.ms_sum.items()} if n else {}}


class SyncWatch:
    """Host synchronisations inside the decode step (``SGLANG_DDTREE_SYNC_CHECK=1``, a developer
    switch; CUDA only): :meth:`watch` turns torch's CUDA sync-debug mode to ``warn`` for the step,
    and each warning is attributed to the innermost frame outside torch. A new site is logged once
    with its stack; ``sites`` counts them (``/server_info ddtree.host_syncs``)."""

    def __init__(self):
        self.sites: Dict[str, int] = {}
        self._where: Dict[Tuple[str, int], str] = {}

    @staticmethod
    def enabled(device) -> bool:
        return bool(SYNC_CHECK.get()) and str(device).startswith("cuda") and torch.cuda.is_available()

    @contextmanager
    def watch(self):
        previous = torch.cuda.get_sync_debug_mode()
        # Switched on before the handler is installed: torch's one-time notice on switching it on
        # ("... does not yet detect all synchronizing operations") is not a sync of the step.
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            passthrough = warnings.showwarning

            def show(message, category, filename, lineno, file=None, line=None):
                if "called a synchronizing CUDA operation" not in str(message):
                    return passthrough(message, category, filename, lineno, file, line)
                # The stack is walked once per warning location (a known one is only counted).
                where = (filename, lineno)
                site = self._where.get(where)
                if site is None:
                    site = self._where[where] = self._site(traceback.extract_stack()[:-1])
                self.sites[site] = self.sites.get(site, 0) + 1

            warnings.showwarning = show
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode(previous)

    def _site(self, stack) -> str:
        frames = [f for f in stack if "/torch/" not in f.filename and "/warnings.py" not in f.filename]
        site = f"{frames[-1].filename}:{frames[-1].lineno} {frames[-1].name}" if frames else "<unknown>"
        if site not in self.sites:
            logger.warning("DDTREE: host synchronisation in the decode step at %s; stack:\n%s", site,
                           "".join(traceback.format_list(frames[-8:])))
        return site
