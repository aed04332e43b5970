"""Where a decode step's device time goes, from two torch-profiler traces of the same engine
(``step_cost.py --profile``): one generation with few decode steps and one with more, each
traced from its prefill to its end. Summed per kernel name, their difference divided by the
difference in decode steps is the kernel's time per decode step: the prefill, and anything else
both traces share once, cancels.

Pure functions over Chrome-trace JSON (``torch.profiler`` ``export_chrome_trace``, plain or
gzipped); no GPU needed.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from pathlib import Path
from typing import Dict, List, Optional

# Trace event categories that are device work (kernels, copies, memsets). CPU-only traces (the
# CPU smoke runs) have none of these: their "cpu_op" events stand in, labelled as such.
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def load_events(path) -> List[dict]:
    """The ``traceEvents`` of a Chrome trace file (``.json`` or ``.json.gz``)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def totals(events: List[dict], cats=DEVICE_CATS) -> Dict[str, float]:
    """Summed duration (us) per event name over complete events (``ph == "X"``) of ``cats``."""
    out: Dict[str, float] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in cats:
            out[e["name"]] = out.get(e["name"], 0.0) + float(e.get("dur", 0.0))
    return out


def launches(events: List[dict], cats=DEVICE_CATS) -> Dict[str, int]:
    """Number of complete events (``ph == "X"``) of ``cats`` per event name: kernel launches."""
    out: Dict[str, int] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in cats:
            out[e["name"]] = out.get(e["name"], 0) + 1
    return out


def trace_kind(events: List[dict]) -> str:
    """"device" when the trace holds device work, else "cpu_op" (a CPU-only trace)."""
    return "device" if any(e.get("cat") in DEVICE_CATS for e in events) else "cpu_op"


# Kernel families, by name (first match wins): what a per-phase table splits the device time into.
CATEGORIES = (
    ("gemm", re.compile(r"gemm|cutlass|xmma|nvjet|cublas|gemv|splitk|matmul|sm90_|sm100_|sm120_|_skinny_kernel|_split_sum_kernel",
                        re.I)),
    ("norm", re.compile(r"norm", re.I)),  # (before attention: flashinfer's norm kernels)
    # (before attention: _tree_gdn_fwd_kernel, the one-chunk tree GatedDeltaNet, ends in _fwd_kernel)
    ("gdn", re.compile(r"gdn|gated_delta|gating_delta|delta_rule", re.I)),
    ("attention", re.compile(r"_fwd_kernel|attn|attention|flash|flashinfer|decode_.*kernel|extend_.*kernel", re.I)),
    ("topk_sort", re.compile(r"topk|top_k|sort|radix", re.I)),
    # (the GatedDeltaNet kernels named by their names' other parts: after attention, since _tree_
    # matches _tree_attn_* too)
    ("gdn", re.compile(r"tree_conv|causal_conv|conv1d|fused_recurrent|"
                       r"chunk_|_tree_|commit|mamba_state", re.I)),
    ("copy_elementwise", re.compile(r"copy|memcpy|memset|elementwise|vectorized|index|gather|scatter|cat|fill|"
                                    r"reduce|arange|where", re.I)),
)


def category(name: str) -> str:
    """The kernel family of a trace event name (:data:`CATEGORIES`), "other" when none matches."""
    for cat, pattern in CATEGORIES:
        if pattern.search(name):
            return cat
    return "other"


def per_step(short: Dict[str, float], long: Dict[str, float], steps_short: int, steps_long: int,
             top: int = 25) -> dict:
    """Per-decode-step time (ms) per name from the two traces' totals (us).

    Returns ``{"ms_per_step": total, "top": [[name, ms], ...]}`` with the ``top`` names by time
    (negative differences, noise on names that barely differ, are kept in the total and left out
    of the list), and ``"noise"`` saying so when the total itself is not positive."""
    if steps_long <= steps_short:
        raise ValueError(f"per_step: the long trace needs more decode steps ({steps_long} <= {steps_short})")
    span = steps_long - steps_short
    diff = {n: (long.get(n, 0.0) - short.get(n, 0.0)) / span / 1e3 for n in set(short) | set(long)}
    ranked = sorted(((n, ms) for n, ms in diff.items() if ms > 0), key=lambda x: -x[1])
    by_cat: Dict[str, float] = {}
    for n, ms in diff.items():
        by_cat[category(n)] = by_cat.get(category(n), 0.0) + ms
    out = {"ms_per_step": round(sum(diff.values()), 4),
           "by_category": {c: round(ms, 4) for c, ms in sorted(by_cat.items(), key=lambda x: -x[1])},
           "top": [[_short_name(n), round(ms, 4)] for n, ms in ranked[:top]]}
    if out["ms_per_step"] <= 0:  # e.g. host time on a busy CPU: say so rather than pass it off as a time
        out["noise"] = (f"the {steps_long}-step trace summed no more than the {steps_short}-step one: the "
                        "difference is below the noise, these numbers measure nothing")
    return out


def _short_name(name: str, limit: int = 120) -> str:
    """Kernel names of templated CUDA code run to kilobytes; the table needs their start."""
    return name if len(name) <= limit else name[: limit - 3] + "..."


PHASE_PREFIX = "ddtree."  # the decode step's phases (debug_log.StepTimer's profiler ranges)
OUTSIDE = "outside"


def phase_totals(events: List[dict]) -> Dict[str, float]:
    """Device time (us) per ``"<phase>/<kernel family>"``: each kernel counts for the phase whose
    GPU span (the profiler's ``gpu_user_annotation`` of a ``ddtree.<phase>`` range, same device)
    holds its start, else for :data:`OUTSIDE` (between phases, or an engine without them)."""
    spans: Dict[object, List[tuple]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "gpu_user_annotation" and str(e.get("name", "")).startswith(PHASE_PREFIX):
            t0 = float(e.get("ts", 0.0))
            spans.setdefault(e.get("pid"), []).append((t0, t0 + float(e.get("dur", 0.0)), e["name"][len(PHASE_PREFIX):]))
    starts = {}
    for pid, v in spans.items():
        v.sort()  # a step's phases follow one another on the device: the spans do not overlap
        starts[pid] = [a for a, _, _ in v]
    out: Dict[str, float] = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in DEVICE_CATS:
            continue
        t, phase = float(e.get("ts", 0.0)), OUTSIDE
        i = bisect.bisect_right(starts.get(e.get("pid"), ()), t) - 1  # the last span starting at or before t
        if i >= 0 and t < spans[e.get("pid")][i][1]:
            phase = spans[e.get("pid")][i][2]
        key = f"{phase}/{category(e['name'])}"
        out[key] = out.get(key, 0.0) + float(e.get("dur", 0.0))
    return out


def phases_per_step(short: Dict[str, float], long: Dict[str, float], steps_short: int, steps_long: int) -> dict:
    """``{phase: {family: ms per decode step}}`` from two traces' :func:`phase_totals`."""
    span = steps_long - steps_short
    out: Dict[str, Dict[str, float]] = {}
    for key in sorted(set(short) | set(long)):
        phase, fam = key.split("/", 1)
        ms = (long.get(key, 0.0) - short.get(key, 0.0)) / span / 1e3
        if abs(ms) >= 5e-5:
            out.setdefault(phase, {})[fam] = round(ms, 4)
    return out


def summarize(short_path, long_path, steps_short: int, steps_long: int, top: int = 40) -> dict:
    """:func:`per_step` of two trace files, with the kind of events it summed; on device traces
    also ``by_phase`` (:func:`phases_per_step`) and ``launches`` (``{name: launches per decode
    step}`` for the ``top`` names, differenced like the times) and ``launches_per_step`` (all
    names)."""
    ev_s, ev_l = load_events(short_path), load_events(long_path)
    kind = trace_kind(ev_l)
    cats = DEVICE_CATS if kind == "device" else ("cpu_op",)
    out = per_step(totals(ev_s, cats), totals(ev_l, cats), steps_short, steps_long, top)
    out.update(kind=kind, decode_steps=[steps_short, steps_long])
    if kind == "device":
        out["by_phase"] = phases_per_step(phase_totals(ev_s), phase_totals(ev_l), steps_short, steps_long)
        n_s, n_l = launches(ev_s, cats), launches(ev_l, cats)
        span = steps_long - steps_short
        per = {n: (n_l.get(n, 0) - n_s.get(n, 0)) / span for n in set(n_s) | set(n_l)}
        shown = {name for name, _ in out["top"]}
        out["launches"] = {_short_name(n): round(c, 2) for n, c in per.items() if _short_name(n) in shown}
        out["launches_per_step"] = round(sum(per.values()), 1)
    return out


def find_trace(folder) -> Optional[Path]:
    """The one trace sglang's profiler wrote into ``folder`` (``*.trace.json.gz``; a folder per
    traced pass), or None; more than one is an error (which would be the pass's?)."""
    hits = sorted(Path(folder).glob("*.trace.json*"))
    if len(hits) > 1:
        raise ValueError(f"find_trace: {len(hits)} traces in {folder}, expected one")
    return hits[0] if hits else None
