"""Replayed serving benchmark: tokens per second and accept length of no speculation, sglang's
DFLASH and DDTREE (chain, fixed budgets, budget auto) on one drafter trace, at several
concurrencies, with every engine on dummy weights accepting exactly what the recorded pair
accepted (the replay drafter, ``SGLANG_DDTREE_BENCH_REPLAY``, docs/traces.md "Replay").

    python benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36
    python benchmark/ddtree/replay_bench.py --trace benchmark/ddtree/traces/humaneval.pt --models /tmp/qwen36 \\
        --auto-table STEP_COST.json --max-concurrency DFLASH=16 --out replay.json [--plot replay.png]
    python benchmark/ddtree/replay_bench.py --report replay.json [more.json ...] [--plot replay.png]  # again

**Engines.** One per configuration, each in a process of its own (a scheduler that dies takes
only its configuration down), built as ``step_cost.py`` builds them (``step_cost.engine_kwargs``:
``no-spec``, ``DFLASH``, ``DDTREE-chain``, ``DDTREE-<budget>``, ``DDTREE-auto``, ``CONFIG@N``;
``--engine-arg`` / ``--ddtree-arg`` / ``--config-arg``), dummy weights (the replay refuses real
ones; the tiny test models under build/tiny are allowed too), with ``SGLANG_DDTREE_BENCH_REPLAY``
set to ``--trace`` for every engine: without speculation the replay replaces the decode logits
too, so every configuration's output is the trace's. ``DDTREE-auto`` chooses over
``--auto-table`` (``step_cost.py`` tables of the same shapes and device; several are merged in
order, a later table's row in place of an earlier one's). ``--pin chain 16 ...``: DDTREE-auto's
engine also serves those fixed choices, each pinned for its own rows (``DDTREE-auto=16``: every
step verifies budget 16, as a fixed-budget engine's step, with no profile update or shadow
chain; ``SGLANG_DDTREE_BENCH_PIN``), after auto's row at each concurrency where the table has the
choice: one engine start for every DDTREE configuration, and no engine-to-engine spread between
them. A pinned row's ``pinned`` names its choice; its ``choices`` must show that one alone.

**Requests.** The trace's requests (``testing.trace_replay.replay_requests``: the prompt's token
ids as recorded, greedy, ``max_new_tokens`` = the output length ``T``, ``ignore_eos``). Per
(configuration, concurrency ``c``): a warm-up round, then ``--rounds`` timed rounds. A round sends
``max(c, --round-requests)`` requests (default: the trace's request count ``R``), trace requests
``0, 1, ..., R - 1, 0, 1, ...`` in that order, keeping ``c`` in flight (a new one starts as one
finishes); the warm-up sends ``max(c, --warmup-requests)`` (default: a round's).

**A row** (one per configuration and concurrency; the median timed round by total tokens/s,
each round's values beside it):

- ``tok_s_per_request``: the mean over the round's requests of ``T / latency`` (latency: from the
  request's send to its completion, prefill included); ``tok_s_total``: the round's output tokens
  / its wall time; ``wall_s``; ``*_rounds``: every timed round's.
- ``accept_length``: output tokens per target forward over the timed requests, ``sum T / sum
  spec_verify_ct`` (sglang's ``spec_accept_length``, the prefill's token counted; 1.0 without
  speculation); ``accept_length_per_request``: ``T / spec_verify_ct`` per trace request (None
  where the row sent none).
- ``sim_accept_length``: the same ratio from the offline simulator (``core/trace_sim.py``) over
  the same requests, for the configuration's budget / top-k / max depth (DFLASH and the chain:
  ``trace_sim.CHAIN``); ``sim_agrees``: whether every request's verify steps equal the
  simulator's. Budget auto chooses per step: its simulator value is given only when one choice
  made every timed step (else ``sim_by_choice``, each choice's value over the same requests).
- ``outputs_ok``: every output equals the trace's output; a row where one does not carries
  ``failed``.
- ``timed``: DDTREE's step counters over the timed rounds (``step_cost._ddtree_counts``);
  ``choices``: budget auto's steps per choice in them, ``policy`` its estimates after the row
  (``step_cost.policy_snapshot``); ``phase_ms`` (``--phases``): device ms per
  decode step and phase over them (``step_cost.phase_ms_per_step``).

Output: ``--out`` (``{"meta": trace meta, device, commit, arguments; "rows": [...]}``), a
``[replay] {row}`` line per row, and a markdown table (tokens/s per request and accept length
per configuration and concurrency, ratios to DFLASH and to no speculation; budget auto against
the best fixed DDTREE configuration with the timed rounds' spread). Exit status 1 when a
configuration's process or a row failed, or a measured accept length differs from the simulator's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))

import step_cost as sc  # noqa: E402

DEFAULT_CONFIGS = ["no-spec", "DFLASH", "DDTREE-chain", "DDTREE-16", "DDTREE-32", "DDTREE-64", "DDTREE-auto"]
PROG = "replay_bench.py"


# ----------------------------------------------------------------------------- simulator

def sim_config(cfg: str, kw: dict, L: int):
    """The simulator's configuration for engine arguments ``kw`` of configuration ``cfg``: None
    without speculation, ``trace_sim.CHAIN`` for DFLASH, else the DDTREE worker's budget / top-k
    (its default when not given) / max depth; budget auto: None (it chooses per step)."""
    from sglang_ddtree.core import trace_sim

    algo = kw.get("speculative_algorithm")
    if algo is None:
        return None
    if algo == "DFLASH":
        return trace_sim.CHAIN
    budget = kw.get("speculative_ddtree_budget")
    if isinstance(budget, str):  # "auto"
        return None
    return _ddtree_sim(int(budget), kw, L)


def _ddtree_sim(budget: int, kw: dict, L: int):
    from sglang_ddtree.core import trace_sim
    from sglang_ddtree.server_args import DEFAULT_TOPK

    depth = kw.get("speculative_ddtree_max_depth")
    cfg = trace_sim.SimConfig(budget=budget, topk=int(kw.get("speculative_ddtree_topk") or DEFAULT_TOPK),
                              max_depth=None if depth is None else int(depth))
    return trace_sim.CHAIN if cfg == trace_sim.SimConfig(budget=L, topk=1) else cfg


def choice_sim(choice: str, kw: dict, L: int):
    """The simulator's configuration of one budget-auto choice (``"chain"`` or a budget)."""
    from sglang_ddtree.core import trace_sim

    return trace_sim.CHAIN if choice == "chain" else _ddtree_sim(int(choice), kw, L)


def accept_ratio(tokens: List[int], steps: List[int]) -> float:
    """``sum tokens / sum steps`` (1.0 without steps)."""
    return sum(tokens) / sum(steps) if sum(steps) else 1.0


# ----------------------------------------------------------------------------- one round

async def _round(engine, reqs: List[dict], order: List[int], c: int) -> tuple:
    """Send ``reqs[i]`` for ``i`` in ``order`` with ``c`` in flight; ``(wall s, [(i, output,
    latency s)])`` in ``order``'s order."""
    sem = asyncio.Semaphore(c)

    async def one(i):
        async with sem:
            t = time.perf_counter()
            out = await engine.async_generate(input_ids=reqs[i]["input_ids"], sampling_params=reqs[i]["sampling_params"])
            return i, out, time.perf_counter() - t

    t0 = time.perf_counter()
    done = await asyncio.gather(*(one(i) for i in order))
    return time.perf_counter() - t0, list(done)


def round_stats(done: list, wall: float) -> dict:
    toks = [o["meta_info"]["completion_tokens"] for _, o, _ in done]
    return dict(wall_s=wall, tok_s_total=sum(toks) / wall,
                tok_s_per_request=statistics.mean(n / lat for n, (_, _, lat) in zip(toks, done)))


def measure(trace: Path, target: str, drafter: str, cfg: str, concurrency: List[int], extra: dict,
            ddtree_extra: dict, auto_table: Optional[str], rounds: int, round_requests: int,
            warmup_requests: Optional[int], config_extra: Optional[dict] = None, on_row=None,
            pins: Sequence[str] = ()) -> List[dict]:
    """One engine for ``cfg`` replaying ``trace``; one row per concurrency (module docstring).
    ``on_row``: called with the rows so far after each one (the child saves them). ``pins``
    (``DDTREE-auto`` only): after auto's row at each concurrency, one row per pinned choice
    (``DDTREE-auto=<choice>``) where the table has the choice at that concurrency."""
    import sglang as sgl
    import torch

    from sglang_ddtree.config import BENCH_REPLAY
    from sglang_ddtree.core import trace_sim
    from sglang_ddtree.core.traces import TraceSet
    from sglang_ddtree.testing.trace_replay import replay_requests

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    kw = sc.engine_kwargs(target, drafter, cfg, max(concurrency), extra, ddtree_extra, auto_table, config_extra, dev)
    traces = TraceSet.load(trace).requests
    reqs = replay_requests(trace)
    R, L = len(reqs), traces[0].depth
    expected = [t.output.tolist() for t in traces]
    sims: Dict[object, list] = {}

    def simulated(scfg) -> list:
        if scfg not in sims:
            sims[scfg] = trace_sim.simulate(traces, scfg)
        return sims[scfg]

    os.environ[BENCH_REPLAY.name] = str(Path(trace).resolve())  # read by the engine's scheduler processes
    pinning = sc.Pins(cfg, pins, auto_table, "replay")
    t0 = time.time()
    engine = sgl.Engine(**kw)
    startup = time.time() - t0
    rows = []
    try:
        for c, pin in pinning.cells(concurrency):
            label = pinning.label(pin)
            pinning.set(pin)
            n_round = max(c, round_requests or R)
            n_warm = max(c, warmup_requests or n_round)
            order = [j % R for j in range(n_round)]
            engine.loop.run_until_complete(_round(engine, reqs, [j % R for j in range(n_warm)], c))
            before = sc._ddtree_counts(engine)
            per_round, outs = [], []
            for _ in range(rounds):
                wall, done = engine.loop.run_until_complete(_round(engine, reqs, order, c))
                per_round.append(round_stats(done, wall))
                outs += done
            after = sc._ddtree_counts(engine)
            med = sorted(per_round, key=lambda x: x["tok_s_total"])[(rounds - 1) // 2]
            row = dict(config=label, concurrency=c, requests_per_round=n_round, warmup_requests=n_warm, rounds=rounds,
                       startup_s=round(startup, 1), wall_s=round(med["wall_s"], 4),
                       tok_s_per_request=round(med["tok_s_per_request"], 3), tok_s_total=round(med["tok_s_total"], 2),
                       tok_s_per_request_rounds=[round(x["tok_s_per_request"], 3) for x in per_round],
                       tok_s_total_rounds=[round(x["tok_s_total"], 2) for x in per_round])
            # Exactness: every output is the trace's; verify steps per request as the simulator's.
            wrong = sorted({i for i, o, _ in outs if list(o["output_ids"]) != expected[i]})
            row["outputs_ok"] = not wrong
            if wrong:
                row["failed"] = f"output differs from the trace's at trace request(s) {wrong[:10]}"
            spec = kw.get("speculative_algorithm") is not None
            toks = [o["meta_info"]["completion_tokens"] for _, o, _ in outs]
            steps = [(o["meta_info"].get("spec_verify_ct") or 0) if spec else n for (_, o, _), n in zip(outs, toks)]
            idx = [i for i, _, _ in outs]
            row["accept_length"] = round(accept_ratio(toks, steps), 4)
            per_req: List[Optional[float]] = [None] * R
            seen: Dict[int, set] = {}
            for i, n, s in zip(idx, toks, steps):
                seen.setdefault(i, set()).add((n, s))
                per_req[i] = round(n / s, 4) if s else None
            row["accept_length_per_request"] = per_req
            if len(seen) and any(len(v) > 1 for v in seen.values()):
                row["repeat_mismatch"] = sorted(i for i, v in seen.items() if len(v) > 1)
            if before is not None and after is not None:
                timed = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
                row["timed"] = timed
                phases = sc.phase_ms_per_step(timed)  # --phases
                if phases is not None:
                    row["phase_ms"] = phases
                choices = sc.choices_of(timed)
                if choices or kw.get("speculative_ddtree_budget") == "auto":
                    row["choices"] = choices
                    row["policy"] = sc.policy_snapshot(engine)  # its estimates after the row
                sc.Pins.check(row, pin, choices)
            scfg = sim_config(cfg, kw, L) if pin is None else choice_sim(pin, kw, L)
            if not spec:
                row.update(sim_accept_length=1.0, sim_agrees=row["accept_length"] == 1.0)
            elif scfg is not None:
                res = simulated(scfg)
                row["sim_config"] = scfg.label
                row["sim_accept_length"] = round(accept_ratio([res[i].output_len for i in idx],
                                                              [res[i].steps for i in idx]), 4)
                row["sim_agrees"] = all(s == res[i].steps for i, s in zip(idx, steps)) and "repeat_mismatch" not in row
                if not row["sim_agrees"]:
                    row["sim_differs_at"] = sorted({i for i, s in zip(idx, steps) if s != res[i].steps})[:10]
            else:  # budget auto: exact only where one choice made every timed step
                used = [k for k, v in (row.get("choices") or {}).items() if v]
                by = {}
                for ch in used:
                    res = simulated(choice_sim(ch, kw, L))
                    by[ch] = round(accept_ratio([res[i].output_len for i in idx], [res[i].steps for i in idx]), 4)
                row["sim_by_choice"] = by
                if len(used) == 1:
                    res = simulated(choice_sim(used[0], kw, L))
                    row["sim_config"] = choice_sim(used[0], kw, L).label
                    row["sim_accept_length"] = by[used[0]]
                    row["sim_agrees"] = all(s == res[i].steps for i, s in zip(idx, steps))
                else:
                    row["sim_accept_length"] = None
                    row["sim_agrees"] = None  # mixed choices: no single configuration to simulate
            rows.append(row)
            shown = {k: v for k, v in row.items() if k != "accept_length_per_request"}
            print(f"[replay] {json.dumps(shown)}", flush=True)
            if on_row is not None:
                on_row(rows)
        try:
            st = (engine.get_server_info().get("internal_states") or [{}])[0]
            for r in rows:
                r.update(max_running_requests=st.get("max_running_requests"),
                         max_total_num_tokens=st.get("max_total_num_tokens"))
        except Exception as e:  # reported, never the reason a sweep stops
            rows[-1]["server_info_error"] = repr(e)
    finally:
        engine.shutdown()
        pinning.close()
    return rows


# ----------------------------------------------------------------------------- report

def _ratio(x, base) -> str:
    return f"{x / base:.2f}x" if x is not None and base else "-"


def markdown(rows: List[dict]) -> str:
    """Per configuration and concurrency: tokens/s per request, its ratios to DFLASH and to no
    speculation, total tokens/s, accept length measured and simulated; then budget auto against
    the best fixed DDTREE configuration per concurrency (per-request tokens/s, the rounds' spread
    of both as the noise)."""
    ok = [r for r in rows if not r.get("failed")]
    base = {name: {r["concurrency"]: r["tok_s_per_request"] for r in ok if r["config"] == name}
            for name in ("DFLASH", "no-spec")}
    lines = ["| config | conc | tok/s per request | vs DFLASH | vs no-spec | tok/s total | accept | sim accept |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["concurrency"]
        sim = r.get("sim_accept_length")
        flag = "" if r.get("sim_agrees") in (True, None) else " (differs)"
        lines.append(f"| {r['config']}{' FAILED' if r.get('failed') else ''} | {c} | {r['tok_s_per_request']:.2f} | "
                     f"{_ratio(r['tok_s_per_request'], base['DFLASH'].get(c))} | "
                     f"{_ratio(r['tok_s_per_request'], base['no-spec'].get(c))} | {r['tok_s_total']:.1f} | "
                     f"{r['accept_length']:.3f} | {'-' if sim is None else f'{sim:.3f}'}{flag} |")
    verdicts = auto_verdicts(ok)
    if verdicts:
        lines += ["", "| conc | auto tok/s per request | best fixed | its tok/s | gap | noise | auto >= best "
                      "within noise | auto's choices |", "|---|---|---|---|---|---|---|---|"]
        for v in verdicts:
            lines.append(f"| {v['concurrency']} | {v['auto']:.2f} | {v['best']} | {v['best_tok_s']:.2f} | "
                         f"{v['gap']:+.1%} | {v['noise']:.1%} | {'yes' if v['ok'] else 'no'} | {v['choices']} |")
    return "\n".join(lines)


def _spread(r: dict) -> float:
    x = r.get("tok_s_per_request_rounds") or [r["tok_s_per_request"]]
    return (max(x) - min(x)) / statistics.median(x) if statistics.median(x) else 0.0


def auto_verdicts(rows: List[dict]) -> List[dict]:
    """Per concurrency with a ``DDTREE-auto`` row: the best fixed DDTREE configuration (chain or
    budget) by tokens/s per request, auto's gap to it (negative: auto slower), the noise (the
    larger timed-round spread of the two rows) and whether auto is at least the best within it."""
    out = []
    for a in (r for r in rows if r["config"] == "DDTREE-auto"):
        fixed = [r for r in rows if r["concurrency"] == a["concurrency"] and r["config"].startswith("DDTREE-")
                 and sc.base_config(r["config"]) != "DDTREE-auto"]
        if not fixed:
            continue
        best = max(fixed, key=lambda r: r["tok_s_per_request"])
        gap = a["tok_s_per_request"] / best["tok_s_per_request"] - 1
        noise = max(_spread(a), _spread(best))
        out.append(dict(concurrency=a["concurrency"], auto=a["tok_s_per_request"], best=best["config"],
                        best_tok_s=best["tok_s_per_request"], gap=gap, noise=noise, ok=gap >= -noise,
                        choices=a.get("choices")))
    return out


def plot(rows: List[dict], path: Path) -> bool:
    """Tokens/s per request and accept length against concurrency, a line per configuration, to
    ``path``; False (and a message) when matplotlib is not importable."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"[replay] --plot {path}: matplotlib is not importable here; no plot (make it later with "
              f"{PROG} --report OUT.json --plot {path.name} where it is)", flush=True)
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for cfg in dict.fromkeys(r["config"] for r in rows):
        mine = sorted((r for r in rows if r["config"] == cfg and not r.get("failed")), key=lambda r: r["concurrency"])
        if not mine:
            continue
        xs = [r["concurrency"] for r in mine]
        ax1.plot(xs, [r["tok_s_per_request"] for r in mine], marker="o", label=cfg)
        ax2.plot(xs, [r["accept_length"] for r in mine], marker="o", label=cfg)
    for ax, label in ((ax1, "output tokens/s per request"), (ax2, "tokens per target forward")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def report(d: dict, plot_path: Optional[Path]) -> None:
    print(markdown(d["rows"]), flush=True)
    if plot_path is not None:
        plot(d["rows"], plot_path)


def merged_outputs(paths: List[Path]) -> dict:
    """Several outputs (``--out`` files, or a configuration's own ``<out>.<config>.json``, a list
    of rows) as one: every file's rows in order (a later file's row in place of an earlier one's
    of the same configuration and concurrency), the first meta with ``"from"`` the paths."""
    rows: List[dict] = []
    meta: dict = {}
    for p in paths:
        d = json.loads(Path(p).read_text())
        if isinstance(d, dict):
            meta = meta or dict(d.get("meta") or {})
        got = sc.table_rows(Path(p))
        mine = {(r["config"], r["concurrency"]) for r in got}
        rows = [r for r in rows if (r["config"], r["concurrency"]) not in mine] + got
    return {"meta": dict(meta, **{"from": [str(p) for p in paths]}), "rows": rows}


def problems(rows: List[dict], meta: dict) -> List[str]:
    """What makes the run's exit status 1: failed configurations or rows, simulator disagreements."""
    out = [f"{cfg}: failed ({why})" for cfg, why in (meta.get("failed") or {}).items()]
    out += [f"{r['config']} @ {r['concurrency']}: {r['failed']}" for r in rows if r.get("failed")]
    out += [f"{r['config']} @ {r['concurrency']}: accept length {r['accept_length']} measured, "
            f"{r.get('sim_accept_length')} simulated" for r in rows if r.get("sim_agrees") is False]
    return out


# ----------------------------------------------------------------------------- main

def _commit() -> str:
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (git or "unknown") + ("-dirty" if dirty else "")


def _ours(fn, *args):
    """``fn(*args)``; its ``step_cost.py:`` refusal (SystemExit) said as this script's."""
    try:
        return fn(*args)
    except SystemExit as e:
        raise SystemExit(str(e.code).replace("step_cost.py:", f"{PROG}:", 1)) from None


def check_auto(configs: List[str], tables) -> None:
    """DDTREE-auto needs ``--auto-table`` with DDTREE-<budget> rows (read now, before any engine)."""
    if not any(sc.base_config(c) == "DDTREE-auto" for c in configs):
        return
    if not tables:
        raise SystemExit(f"{PROG}: DDTREE-auto needs --auto-table PATH (step_cost.py tables of these shapes and "
                         "device: the replay measures no step-cost rows of its own)")
    budgets = sc.table_budgets(tables, PROG)
    if not budgets:
        raise SystemExit(f"{PROG}: --auto-table {' '.join(map(str, tables))}: no DDTREE-<budget> rows")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, help="a drafter trace (TraceSet .pt, docs/traces.md)")
    ap.add_argument("--models", type=Path, help="a qwen36_shapes.py output folder (target/, drafter/)")
    ap.add_argument("--target-path")
    ap.add_argument("--drafter-path")
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per concurrency (the row: the median)")
    ap.add_argument("--round-requests", type=int, default=0,
                    help="requests per round, at least the concurrency (default: the trace's request count)")
    ap.add_argument("--warmup-requests", type=int, default=0,
                    help="requests of the warm-up round, at least the concurrency (default: a round's)")
    ap.add_argument("--phases", action="store_true",
                    help="DDTREE configurations: device ms per decode step and phase over the timed rounds "
                         "(SGLANG_DDTREE_PHASE_TIMING=1, as step_cost.py --phases; the row's 'phase_ms')")
    ap.add_argument("--engine-arg", action="append", default=[], help="KEY=JSON extra Engine argument")
    ap.add_argument("--ddtree-arg", action="append", default=[],
                    help="KEY=JSON extra Engine argument for the DDTREE configurations only")
    ap.add_argument("--config-arg", action="append", default=[], metavar="CONFIG:KEY=JSON",
                    help="extra Engine argument for the one configuration labelled CONFIG")
    ap.add_argument("--max-concurrency", action="append", default=[], metavar="CONFIG=N",
                    help="run CONFIG at concurrencies up to N only (e.g. DFLASH=16 at 27B on one H200)")
    ap.add_argument("--auto-table", type=Path, nargs="+",
                    help="DDTREE-auto's step-cost table(s) (step_cost.py outputs; several are merged in order)")
    ap.add_argument("--pin", nargs="+", default=[], metavar="CHOICE",
                    help="DDTREE-auto's engine also serves these fixed choices ('chain' or budgets of --auto-table), "
                         "each pinned for its own rows (DDTREE-auto=CHOICE) after auto's at every concurrency "
                         "(SGLANG_DDTREE_BENCH_PIN): one engine start instead of one per fixed configuration")
    ap.add_argument("--deadline-s", type=float, default=1e9,
                    help="start no new configuration after this many seconds (partial results are kept)")
    ap.add_argument("--case-timeout-s", type=int, default=900, help="per-configuration limit (its own process)")
    ap.add_argument("--plot", type=Path, help="a PNG of tokens/s and accept length (needs matplotlib)")
    ap.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                    help="print the table (and --plot) of earlier outputs, their rows together (a sweep spread "
                         "over several calls); runs nothing")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.report:
        report(merged_outputs(a.report), a.plot)
        return 0
    if a.trace is None or a.out is None or not (a.models or (a.target_path and a.drafter_path)):
        raise SystemExit(f"{PROG}: give --trace, --out and --models DIR or --target-path and --drafter-path")
    if not a.trace.exists():
        raise SystemExit(f"{PROG}: --trace {a.trace}: no such file")
    if a.phases:
        sc.enable_phase_timing()
    caps = {} if a.child else _ours(sc.parse_caps, a.max_concurrency, a.configs)
    sc.check_configs(a.configs, PROG)
    if not a.child:
        check_auto(a.configs, a.auto_table)
        sc.check_pins(a.pin, a.configs, a.auto_table, PROG)
    import torch

    target, drafter = sc.engine_paths(a)
    extra = {k: json.loads(v) for k, v in (e.split("=", 1) for e in a.engine_arg)}
    ddtree_extra = {k: json.loads(v) for k, v in (e.split("=", 1) for e in a.ddtree_arg)}
    per_config = _ours(sc.parse_config_args, a.config_arg, a.configs, a.child)
    if a.child:  # one configuration, in this process
        rows = measure(a.trace, target, drafter, a.configs[0], a.concurrency, extra, ddtree_extra,
                       str(a.auto_table[-1]) if a.auto_table else None, max(1, a.rounds), a.round_requests,
                       a.warmup_requests, per_config.get(a.configs[0]),
                       on_row=lambda done: a.out.write_text(json.dumps(done)), pins=a.pin)
        a.out.write_text(json.dumps(rows))
        return 0

    from importlib.metadata import version

    from sglang_ddtree.core.traces import TraceSet

    trace_set = TraceSet.load(a.trace)
    meta = {"trace": str(a.trace), "trace_meta": trace_set.meta, "trace_requests": len(trace_set.requests),
            "trace_output_tokens": sum(int(r.output.shape[0]) for r in trace_set.requests),
            "target": target, "drafter": drafter, "commit": _commit(), "sglang_version": version("sglang"),
            "torch_version": str(torch.__version__),
            # (the GPU's name from a process of its own: this one holds no GPU memory beside the engines)
            "device": sc.device_facts(False)["device"] if torch.cuda.is_available() else "cpu",
            "rounds": a.rounds, "round_requests": a.round_requests, "warmup_requests": a.warmup_requests,
            "engine_args": extra, "ddtree_args": ddtree_extra}
    if per_config:
        meta["config_args"] = per_config
    auto_table = None
    if a.auto_table and any(sc.base_config(c) == "DDTREE-auto" for c in a.configs):
        auto_table = sc.merge_auto_table(a.auto_table, [], a.out)
        meta["auto_table"] = {"given": [str(t) for t in a.auto_table], "merged": auto_table.name}
    rows: List[dict] = []
    t0 = time.time()
    for cfg in a.configs:
        conc = sc.sweep_concurrency(cfg, a.concurrency, caps, meta, time.time() - t0 > a.deadline_s, "replay")
        if conc is None:
            continue
        one = a.out.with_name(f"{a.out.stem}.{cfg}.json")
        cmd = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--configs", cfg, "--out", str(one),
               "--concurrency", *map(str, conc), "--child"]
        if auto_table is not None:
            cmd += ["--auto-table", str(auto_table.resolve())]
        one.unlink(missing_ok=True)
        t_cfg = time.time()
        try:
            rc = subprocess.run(cmd, timeout=a.case_timeout_s, start_new_session=True).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        meta.setdefault("config_wall_s", {})[cfg] = round(time.time() - t_cfg, 1)  # engine start to shutdown
        got, failure = sc.collect_child(rc, one)
        rows += got
        if failure is not None:
            meta.setdefault("failed", {})[cfg] = failure
            print(f"[replay] {cfg} failed: rc={failure}", flush=True)
        a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    ok = [r for r in rows if not r.get("failed")]
    for name, key in (("DFLASH", "vs_dflash"), ("no-spec", "vs_no_spec")):
        base = {r["concurrency"]: r["tok_s_per_request"] for r in ok if r["config"] == name}
        for r in rows:
            if base.get(r["concurrency"]):
                r[key] = round(r["tok_s_per_request"] / base[r["concurrency"]], 3)
    verdicts = auto_verdicts(ok)
    if verdicts:
        meta["auto_verdicts"] = verdicts
    bad = problems(rows, meta)
    if bad:
        meta["problems"] = bad
    a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    report({"meta": meta, "rows": rows}, a.plot)
    for p in bad:
        print(f"[replay] PROBLEM {p}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
