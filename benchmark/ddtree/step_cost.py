"""Step cost through sglang: ms per decode step for no speculation, the DFLASH chain and DDTREE
at several budgets, at several concurrencies, CUDA graphs and overlap scheduling on, beside the
physical floor (weight bytes / measured memory bandwidth) (issue: benchmarks at Qwen3.6-27B
scale, item 2).

The models are ``qwen36_shapes.py`` folders served with ``--load-format dummy`` (random bf16
weights made on the GPU): step cost does not depend on the weight values. With random weights
DDTREE accepts ~nothing, so every step commits ~1 token and ms/step is the verify + draft +
tree cost that matters; acceptance comes from ``accept_sweep.py``.

Per configuration one engine; per concurrency c: c requests of ``--prompt-len`` random tokens,
first a 1-token generation (prefill), then ``--decode-tokens`` (ignore_eos). ms/step =
(t_decode - t_prefill) / decode steps (verify steps; no speculation: tokens - 1).

    python benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36
    python benchmark/ddtree/step_cost.py --models /tmp/qwen36 --out step_cost.json
    python benchmark/ddtree/step_cost.py --models DIR --configs no-spec DFLASH DDTREE-8 --concurrency 1 2 \\
        --target-path T --drafter-path D --decode-tokens 8   # any pair, e.g. the tiny models on CPU

``--pin chain 16 64`` (with ``--auto-table``): DDTREE-auto's engine also measures those fixed
choices, each pinned for a row of its own (``DDTREE-auto=16``; :class:`Pins`), one engine start
for several DDTREE configurations. A pinned step is a fixed-budget step in an engine sized for the
table's largest budget; the pinned chain drafts with the engine's top-K head (``DDTREE-chain``:
top-1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))



def _ddtree_state(engine):
    """The ``ddtree`` entry of the first scheduler's ``/server_info`` internal state; None for
    other engines or when unavailable."""
    try:
        st = (engine.get_server_info().get("internal_states") or [{}])[0]
    except Exception:
        return None
    return st.get("ddtree") or None


def _ddtree_counts(engine):
    """DDTREE's step counters from ``/server_info`` (steps, graph-replayed verifies, and under
    budget auto the steps per choice), flat; None for other engines or when unavailable."""
    dd = _ddtree_state(engine)
    if not dd:
        return None
    out = {"steps": dd.get("steps", 0), "verify_cuda_graph_steps": dd.get("verify_cuda_graph_steps", 0)}
    for k, v in ((dd.get("budget_policy") or {}).get("steps_by_choice") or {}).items():
        out[f"choice_{k}"] = v
    for site, n in (dd.get("host_syncs") or {}).items():  # SGLANG_DDTREE_SYNC_CHECK=1 (--sync-check)
        out[f"host_sync {site}"] = n
    phases = dd.get("phase_timing")  # SGLANG_DDTREE_PHASE_TIMING=1 (--phases)
    if phases:
        out["phase_steps"] = phases.get("steps", 0)
        for k, v in (phases.get("ms_sum") or {}).items():
            out[f"phase_ms_{k}"] = v
    return out


def policy_snapshot(engine):
    """Budget auto's state from ``/server_info`` (``BudgetPolicy.snapshot``: its estimates, the
    request-steps behind each, the refresh interval), without the step counters; None for
    other engines or when unavailable."""
    pol = (_ddtree_state(engine) or {}).get("budget_policy")
    return {k: v for k, v in pol.items() if k != "steps_by_choice"} if pol else None


def enable_phase_timing() -> None:
    """``--phases``: the engines started from here on time each decode step's phases
    (``SGLANG_DDTREE_PHASE_TIMING=1``, read by their scheduler processes)."""
    from sglang_ddtree.config import PHASE_TIMING

    os.environ[PHASE_TIMING.name] = "1"


def phase_ms_per_step(timed: dict) -> Optional[dict]:
    """Device ms per decode step and phase over the timed steps (the differences of
    :func:`_ddtree_counts` around them), or None without phase timing."""
    n = timed.get("phase_steps") or 0
    if not n:
        return None
    return {k[len("phase_ms_"):]: round(v / n, 4) for k, v in timed.items() if k.startswith("phase_ms_")}

def memory_bandwidth_gbs(gib: float = 2.0) -> float:
    """Device-to-device copy bandwidth (read + write bytes per second), median of 10."""
    import torch

    if not torch.cuda.is_available():
        return float("nan")
    n = int(gib * 2**30) // 2
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    ts = []
    for _ in range(12):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    del a, b
    return 2 * n * 2 / statistics.median(ts[2:]) / 1e9


def device_facts(measure_bandwidth: bool) -> dict:
    """``{"device": name, "copy_bandwidth_gbs": x}`` from a process of its own. The sweep's parent
    must hold no GPU memory while the engines run: in-process, the caching allocator kept the
    4 GiB of copy buffers (plus the CUDA context) for the whole sweep, and budgets 64 / 128 / 256
    and auto ran out of memory capturing their 64-request verify graphs beside it."""
    code = ("import json, sys; sys.path.insert(0, %r); import torch, step_cost as s; "
            "ok = torch.cuda.is_available(); "
            "print(json.dumps({'device': torch.cuda.get_device_name() if ok else 'cpu', "
            "'copy_bandwidth_gbs': s.memory_bandwidth_gbs() if ok and %r else None}))"
            % (str(Path(__file__).resolve().parent), bool(measure_bandwidth)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def base_config(cfg: str) -> str:
    """``CONFIG@N`` is configuration CONFIG again, in an engine of its own (its rows keep the
    label): the spread between engines of one configuration, beside the rounds' spread inside
    one. The budget policy's table reads only the unlabelled rows."""
    name, sep, rep = cfg.partition("@")
    if sep and not (rep.isdigit() and int(rep) >= 2):
        raise ValueError(f"configuration {cfg!r}: a repeat is CONFIG@N with N >= 2")
    return name


def config_budget(cfg: str) -> Optional[int]:
    """The budget of a ``DDTREE-<budget>`` configuration name, else None (the chain, auto, others)."""
    tail = cfg.split("-", 1)[1] if cfg.startswith("DDTREE-") else ""
    return int(tail) if tail.isdigit() else None


def table_rows(path: Path) -> List[dict]:
    """The rows of a step-cost table (``{"meta", "rows"}``) or of a per-configuration file (a list)."""
    d = json.loads(Path(path).read_text())
    return list(d["rows"] if isinstance(d, dict) else d)


def spec_kwargs(cfg: str, drafter: str, auto_table: Optional[str] = None) -> dict:
    cfg = base_config(cfg)
    if cfg == "no-spec":
        return {}
    base = dict(speculative_draft_model_path=drafter, speculative_draft_load_format="dummy")
    if cfg == "DFLASH":
        return dict(base, speculative_algorithm="DFLASH")
    if cfg == "DDTREE-auto":  # the budget policy over this sweep's own table (rows measured before it)
        if not auto_table:
            raise ValueError("DDTREE-auto needs the sweep's table: list it after the DDTREE-<budget> configurations")
        return dict(base, speculative_algorithm="DDTREE", speculative_ddtree_budget="auto",
                    speculative_ddtree_step_cost=auto_table)
    if cfg == "DDTREE-chain":  # the chain through DDTREE's worker: the budget policy's fallback
        return dict(base, speculative_algorithm="DDTREE", speculative_ddtree_budget=15, speculative_ddtree_topk=1)
    if config_budget(cfg) is not None:
        return dict(base, speculative_algorithm="DDTREE", speculative_ddtree_budget=config_budget(cfg))
    raise ValueError(f"unknown configuration {cfg!r} (no-spec, DFLASH, DDTREE-chain, DDTREE-<budget>, DDTREE-auto)")


def _decode_steps(outs) -> int:
    """Decode steps of one generation: verify steps (speculative) or tokens after the first."""
    return max(o["meta_info"].get("spec_verify_ct") or (o["meta_info"]["completion_tokens"] - 1) for o in outs)


def _profile_pass(engine, prompts, decode_tokens: int, cuda: bool) -> dict:
    """Device time per decode step by kernel: two traced generations of the same prompts (a
    quarter of ``decode_tokens`` and all of them), each traced from its prefill to its end with
    sglang's profiler, differenced per kernel name (``trace_summary.py``; CPU: "cpu_op" events).
    The traces are summarised and deleted (tens of MB at 27B size)."""
    import shutil
    import tempfile

    from trace_summary import find_trace, summarize

    root = Path(tempfile.mkdtemp(prefix="step_cost_profile_"))
    try:
        steps, paths = [], []
        for i, n in enumerate((max(2, decode_tokens // 4), decode_tokens)):
            # (no Python stacks or shapes: sglang records both unless told not to; the traces grow)
            engine.start_profile(output_dir=str(root / str(i)), activities=["GPU"] if cuda else ["CPU"],
                                 with_stack=False, record_shapes=False)
            outs = engine.generate(input_ids=prompts, sampling_params=dict(temperature=0.0, max_new_tokens=n,
                                                                           ignore_eos=True))
            engine.stop_profile()
            steps.append(_decode_steps(outs))
            paths.append(find_trace(root / str(i)))
        if None in paths:
            return {"error": f"sglang's profiler wrote no trace under {root}"}
        return summarize(paths[0], paths[1], steps[0], steps[1])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def parse_config_args(items: List[str], configs: List[str], child: bool = False) -> Dict[str, dict]:
    """``CONFIG:KEY=JSON`` items -> ``{CONFIG: {KEY: value}}``; CONFIG must be one of ``configs``
    (``child``: a one-configuration child process, given the sweep's items: the others are skipped)."""
    out: Dict[str, dict] = {}
    for item in items:
        cfg, sep, kv = item.partition(":")
        key, eq, val = kv.partition("=")
        if not (sep and eq and key):
            raise SystemExit(f"step_cost.py: --config-arg {item!r}: expected CONFIG:KEY=JSON")
        if cfg not in configs and child:
            continue
        if cfg not in configs:
            raise SystemExit(f"step_cost.py: --config-arg {item!r}: {cfg!r} is not among --configs")
        out.setdefault(cfg, {})[key] = json.loads(val)
    return out


def parse_config_env(items: List[str], configs: List[str]) -> Dict[str, Dict[str, str]]:
    """``CONFIG:VAR=VALUE`` items -> ``{CONFIG: {VAR: VALUE}}``: environment variables of that one
    configuration's process; VAR must be one of the plugin's (``sglang_ddtree.config``) and CONFIG
    one of ``configs``."""
    from sglang_ddtree.config import REGISTRY

    out: Dict[str, Dict[str, str]] = {}
    for item in items:
        cfg, sep, kv = item.partition(":")
        var, eq, val = kv.partition("=")
        if not (sep and eq and var):
            raise SystemExit(f"step_cost.py: --config-env {item!r}: expected CONFIG:VAR=VALUE")
        if cfg not in configs:
            raise SystemExit(f"step_cost.py: --config-env {item!r}: {cfg!r} is not among --configs")
        if var not in REGISTRY:
            raise SystemExit(f"step_cost.py: --config-env {item!r}: {var} is not a variable of sglang_ddtree.config")
        out.setdefault(cfg, {})[var] = val
    return out


def collect_child(rc, rows_file: Path):
    """``(rows, failure)`` of one configuration's process: the rows it saved, and None or what
    to record as its failure. Rows measured before a failure stay (an engine whose
    shutdown outlasted the case limit after its rows were measured), and the failure says so."""
    rows = json.loads(rows_file.read_text()) if rows_file.exists() else []
    if rc == 0 and rows:
        return rows, None
    return rows, (f"{rc} after {len(rows)} measured row(s)" if rows else rc)


def engine_kwargs(target: str, drafter: str, cfg: str, max_concurrency: int, extra: dict, ddtree_extra: dict,
                  auto_table: Optional[str] = None, config_extra: Optional[dict] = None, dev: str = "cuda") -> dict:
    """The Engine arguments of configuration ``cfg`` on ``dev`` ("cuda" or "cpu"): dummy weights,
    no tokenizer, sized for ``max_concurrency`` requests (CUDA graphs up to it on the GPU; no
    overlap, a small pool on CPU), then :func:`spec_kwargs`, ``extra`` (``--engine-arg``),
    ``ddtree_extra`` (``--ddtree-arg``, DDTREE configurations only; the chain stays a chain) and
    ``config_extra`` (``--config-arg``, this configuration alone), each over the ones before."""
    kw = dict(model_path=target, load_format="dummy", skip_tokenizer_init=True, device=dev,
              dtype="bfloat16" if dev == "cuda" else "float32",
              max_running_requests=max_concurrency, log_level="error")
    if dev == "cuda":
        # sglang's automatic --mem-fraction-static (DDTREE lowers it by its verify graphs' need,
        # engine/verify_memory.py): a fixed 0.85 left budgets 64+ at 64 requests too little.
        # --engine-arg mem_fraction_static=... still pins it.
        kw["cuda_graph_max_bs_decode"] = max_concurrency
    else:
        kw.update(disable_overlap_schedule=True, max_total_tokens=16384, mem_fraction_static=0.3)
    kw.update(spec_kwargs(cfg, drafter, auto_table))
    kw.update(extra)
    if cfg.startswith("DDTREE"):
        kw.update(ddtree_extra)
        if base_config(cfg) == "DDTREE-chain":  # stays a chain whatever --ddtree-arg says
            kw.update(spec_kwargs(cfg, drafter))
    kw.update(config_extra or {})
    return kw


def measure(target: str, drafter: str, cfg: str, concurrency: list, prompt_len: int, decode_tokens: int,
            vocab: int, extra: dict, ddtree_extra: dict, auto_table: Optional[str] = None, rounds: int = 1,
            profile: bool = False, on_row=None, config_extra: Optional[dict] = None, pins=()) -> list:
    """One engine for ``cfg``; per concurrency a warm-up pass, then ``rounds`` timed passes (a
    one-token prefill pass and a full pass each; ms per decode step from their difference): the
    row carries the median round and, with ``rounds > 1``, every round's ms per step. ``profile``:
    then two traced passes, the row's ``profile`` (:func:`_profile_pass`; never timed). ``on_row``:
    called with the rows so far after each one (the child saves them: an engine whose shutdown
    hangs past the case limit keeps what it measured). ``config_extra``: Engine arguments of
    this configuration alone (``--config-arg``), applied last. ``pins`` (DDTREE-auto only,
    :class:`Pins`): after auto's row at each concurrency, one row per pinned choice."""
    import random

    import sglang as sgl
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    kw = engine_kwargs(target, drafter, cfg, max(concurrency), extra, ddtree_extra, auto_table, config_extra, dev)
    rng = random.Random(0)
    rows = []
    pinning = Pins(cfg, pins, auto_table, "step_cost")
    t0 = time.time()
    engine = sgl.Engine(**kw)
    startup = time.time() - t0
    # STEP_COST_WAIT_FOR=FILE: start timing only once FILE exists (other work sharing the GPU
    # during start-up, such as a diagnostics run in the same device call, has finished).
    wait_for = os.environ.get("STEP_COST_WAIT_FOR")
    while wait_for and not os.path.exists(wait_for):
        time.sleep(1)
    try:
        prompts_at: Dict[int, list] = {}
        for c, pin in pinning.cells(concurrency):
            pinning.set(pin)
            if c not in prompts_at:  # (a pinned row takes its concurrency's prompts)
                prompts_at[c] = [[rng.randrange(10, vocab - 10) for _ in range(prompt_len)] for _ in range(c)]
            prompts = prompts_at[c]
            sp1 = dict(temperature=0.0, max_new_tokens=1, ignore_eos=True)
            spn = dict(temperature=0.0, max_new_tokens=decode_tokens, ignore_eos=True)
            engine.generate(input_ids=prompts, sampling_params=spn)  # warm-up (graphs, kernels)
            before = _ddtree_counts(engine)  # outside the timed region
            per_round = []
            for _ in range(rounds):  # the same timed pass again: the spread inside one engine
                t = time.perf_counter()
                engine.generate(input_ids=prompts, sampling_params=sp1)
                t_prefill = time.perf_counter() - t
                t = time.perf_counter()
                outs = engine.generate(input_ids=prompts, sampling_params=spn)
                t_all = time.perf_counter() - t
                n_steps = max(1, _decode_steps(outs))  # decode steps after the prefill's token
                per_round.append((t_prefill, t_all, (t_all - t_prefill) * 1e3 / n_steps))
            after = _ddtree_counts(engine)
            toks = [o["meta_info"]["completion_tokens"] for o in outs]
            t_prefill, t_all, ms = sorted(per_round, key=lambda x: x[2])[(rounds - 1) // 2]  # the median round
            rows.append(dict(config=pinning.label(pin), concurrency=c, startup_s=round(startup, 1),
                             prefill_s=round(t_prefill, 4),
                             total_s=round(t_all, 4), steps=n_steps, tokens_per_request=statistics.mean(toks),
                             ms_per_step=round(ms, 3), tokens_per_step=statistics.mean(toks) / n_steps))
            if rounds > 1:
                rows[-1]["ms_per_step_rounds"] = [round(x[2], 3) for x in per_round]
            if before is not None and after is not None:  # DDTREE: what the timed steps did
                timed = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
                phases = phase_ms_per_step(timed)
                rows[-1]["timed"] = {k: v for k, v in timed.items() if not k.startswith("phase_")}
                if phases is not None:
                    rows[-1]["phase_ms"] = phases
                Pins.check(rows[-1], pin, choices_of(timed))
            if profile:
                rows[-1]["profile"] = _profile_pass(engine, prompts, decode_tokens, dev == "cuda")
            print(f"[step_cost] {json.dumps(rows[-1])}", flush=True)
            if on_row is not None:
                on_row(rows)
        try:  # what the engine sized (the hybrid pool decides the concurrency that fits)
            st = (engine.get_server_info().get("internal_states") or [{}])[0]
            for r in rows:
                r.update(max_total_num_tokens=st.get("max_total_num_tokens"),
                         max_running_requests=st.get("max_running_requests"))
            dd = st.get("ddtree") or {}
            if dd:  # whether the tree verify replayed CUDA graphs (totals over this engine's rows)
                rows[-1].update(verify_cuda_graph_steps=dd.get("verify_cuda_graph_steps"), ddtree_steps=dd.get("steps"))
                if "skinny_gemm_routed" in dd:  # --speculative-ddtree-gemm-table: the products the kernel took
                    rows[-1]["skinny_gemm_routed"] = dd["skinny_gemm_routed"]
        except Exception as e:  # reported, never the reason a sweep stops
            rows[-1]["server_info_error"] = repr(e)
    finally:
        engine.shutdown()
        pinning.close()
    return rows


def choices_of(timed: dict) -> dict:
    """Budget auto's steps per choice (``{"chain": n, "16": m}``) from :func:`_ddtree_counts`
    differences."""
    return {k[len("choice_"):]: v for k, v in timed.items() if k.startswith("choice_")}


class Pins:
    """``--pin``: DDTREE-auto's engine also serves fixed choices, each pinned for its own rows
    (``DDTREE-auto=<choice>``) through the file ``SGLANG_DDTREE_BENCH_PIN`` names, which the
    worker re-reads when it changes. Made before the engine (the variable is read at its start);
    other configurations, or no pins: inert. :meth:`cells` lists ``(concurrency, choice or None)``
    in order, a choice only where the table (``auto_table``) has it at that concurrency (its
    verify graphs are captured from the table)."""

    def __init__(self, cfg: str, pins, auto_table: Optional[str], tag: str):
        self.pins = list(pins or ()) if base_config(cfg) == "DDTREE-auto" else []
        self.cfg, self.tag, self.file, self._n = cfg, tag, None, 0
        if self.pins:
            import tempfile

            from sglang_ddtree.config import BENCH_PIN
            from sglang_ddtree.core.budget_policy import BudgetPolicy, StepCostTable

            self.var = BENCH_PIN.name
            self.policy = BudgetPolicy(StepCostTable.from_json(auto_table))
            self.file = Path(tempfile.mkdtemp(prefix="ddtree-pin-")) / "pin"
            self.file.write_text("auto")
            os.environ[self.var] = str(self.file)

    def cells(self, concurrency: List[int]) -> list:
        from sglang_ddtree.core.budget_policy import CHAIN

        out = []
        for c in concurrency:
            out.append((c, None))
            for p in self.pins:
                if (CHAIN if p == "chain" else int(p)) in self.policy.candidates_at(c):
                    out.append((c, p))
                else:
                    print(f"[{self.tag}] {self.cfg}={p} @ {c}: not pinned (the table has no such row up to {c} "
                          "requests)", flush=True)
        return out

    def set(self, pin: Optional[str]) -> None:
        """Pin ``pin`` (None: auto) for the steps from now on."""
        if self.file is None:
            return
        self._n += 1
        self.file.write_text(pin or "auto")
        st = self.file.stat()  # a new modification time even on a coarse clock
        os.utime(self.file, ns=(st.st_atime_ns, st.st_mtime_ns + self._n * 10**9))

    def label(self, pin: Optional[str]) -> str:
        return self.cfg if pin is None else f"{self.cfg}={pin}"

    @staticmethod
    def check(row: dict, pin: Optional[str], choices: dict) -> None:
        """A pinned row: ``pinned`` set, and ``failed`` where its timed steps (``choices``,
        :func:`choices_of`) chose anything else."""
        if pin is None:
            return
        row["pinned"] = pin
        if {k for k, v in choices.items() if v} != {pin}:
            row["failed"] = f"pinned {pin!r}, the timed steps chose {choices}"

    def close(self) -> None:
        if self.file is not None:
            os.environ.pop(self.var, None)
            self.file.unlink(missing_ok=True)
            self.file.parent.rmdir()
            self.file = None


def check_pins(pins: List[str], configs: List[str], tables, prog: str) -> None:
    """``--pin`` needs DDTREE-auto among the configurations and names 'chain' or budgets of its
    table(s) (read now, before any engine)."""
    if not pins:
        return
    if not any(base_config(c) == "DDTREE-auto" for c in configs):
        raise SystemExit(f"{prog}: --pin serves fixed choices in DDTREE-auto's engine: add DDTREE-auto to --configs")
    budgets = table_budgets(tables or [], prog)
    bad = [p for p in pins if p != "chain" and not (p.isdigit() and int(p) in budgets)]
    if bad or len(set(pins)) != len(pins):
        raise SystemExit(f"{prog}: --pin {' '.join(pins)}: each once, 'chain' or a budget of --auto-table "
                         f"{sorted(budgets)}")


def sweep_concurrency(cfg: str, concurrency: List[int], caps: dict, meta: dict, past_deadline: bool,
                      tag: str) -> Optional[List[int]]:
    """The concurrencies a sweep measures ``cfg`` at, or None to skip it: past the sweep's
    deadline (listed in ``meta["not_run_deadline"]``) or every concurrency over its cap; those
    over its cap are listed in ``meta["over_cap"][cfg]``."""
    if past_deadline:
        meta.setdefault("not_run_deadline", []).append(cfg)
        return None
    conc = [c for c in concurrency if c <= caps.get(cfg, c)]
    if len(conc) < len(concurrency):
        meta.setdefault("over_cap", {})[cfg] = [c for c in concurrency if c not in conc]
    if not conc:
        print(f"[{tag}] {cfg}: every concurrency is over its cap {caps[cfg]}", flush=True)
        return None
    return conc


def check_configs(configs: List[str], prog: str) -> None:
    """Stop a sweep with a misspelt configuration before any engine starts (SystemExit naming it)."""
    for cfg in configs:
        try:
            spec_kwargs(cfg, "", "-")
        except ValueError as e:
            raise SystemExit(f"{prog}: {e}")


def engine_paths(a) -> tuple:
    """(target, drafter) checkpoint folders from --models DIR or --target-path / --drafter-path.

    Without a CUDA device the engines run on sglang's CPU engine with the test harness's sgl_kernel
    stand-in: this puts the harness on the path of this process and of the engines it starts.
    """
    import torch

    if not torch.cuda.is_available():
        harness = ROOT / "test" / "harness"
        os.environ["PYTHONPATH"] = os.pathsep.join([str(harness), os.environ.get("PYTHONPATH", "")])
        os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
        sys.path.insert(0, str(harness))
    return a.target_path or str(a.models / "target"), a.drafter_path or str(a.models / "drafter")


def parse_caps(specs: list, configs: list) -> dict:
    """``--max-concurrency CONFIG=N`` values as ``{config: N}``; a config not in the sweep or a
    cap that is not a positive integer is an error (a typo would otherwise cap nothing)."""
    caps = {}
    for spec in specs:
        cfg, sep, val = spec.partition("=")
        if not sep or not val.strip().isdigit() or int(val) < 1:
            raise SystemExit(f"step_cost.py: --max-concurrency takes CONFIG=N with N a positive integer, got {spec!r}")
        if cfg not in configs:
            raise SystemExit(f"step_cost.py: --max-concurrency names {cfg!r}, which is not in --configs {configs}")
        caps[cfg] = int(val)
    return caps


def table_budgets(tables, prog: str) -> set:
    """The DDTREE budgets with rows in the step-cost tables ``tables`` (paths); SystemExit naming
    a file that is not a step-cost table."""
    from sglang_ddtree.core.budget_policy import StepCostTable

    budgets = set()
    for t in tables:
        try:
            budgets |= set(StepCostTable.from_json(t).budgets())
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{prog}: --auto-table {t}: not a step-cost table ({e!r})")
    return budgets


def check_auto_table(configs: List[str], auto_table) -> None:
    """DDTREE-auto needs DDTREE-<budget> rows to choose from: from ``--auto-table`` (one path or a
    list, read now) or from a DDTREE-<budget> configuration of this sweep listed before it.
    Checked before any engine starts: otherwise auto's engine fails at launch after the others
    have spent their time."""
    autos = [i for i, c in enumerate(configs) if base_config(c) == "DDTREE-auto"]
    if not autos:
        return
    listed_before = any(config_budget(base_config(c)) is not None for c in configs[:autos[0]])
    if auto_table is not None:
        tables = auto_table if isinstance(auto_table, (list, tuple)) else [auto_table]
        budgets = table_budgets(tables, "step_cost.py")
        # The tables may hold only the chain / no-spec rows when the budgets are measured in this
        # sweep before auto: the merge puts those rows beside the tables'.
        if not budgets and not listed_before:
            raise SystemExit(f"step_cost.py: --auto-table {' '.join(map(str, tables))}: no DDTREE-<budget> rows, "
                             "and no DDTREE-<budget> configuration is listed before DDTREE-auto")
        return
    if not listed_before:
        raise SystemExit("step_cost.py: DDTREE-auto chooses among the DDTREE-<budget> rows measured before it: "
                         "list a DDTREE-<budget> configuration (e.g. DDTREE-16) before it, or give --auto-table PATH")


def merge_rows(layers) -> List[dict]:
    """Step-cost rows of several tables merged in order: a later layer's row in place of an
    earlier one's for the same (configuration, concurrency)."""
    merged: List[dict] = []
    for layer in layers:
        mine = {(base_config(r["config"]), r["concurrency"]) for r in layer}
        merged = [r for r in merged if (base_config(r["config"]), r["concurrency"]) not in mine] + list(layer)
    return merged


def merge_auto_table(given, rows: List[dict], out: Path) -> Path:
    """``--auto-table``'s rows (one path or several, a later table's row in place of an earlier
    one's for the same (configuration, concurrency)), then this sweep's rows measured so far in
    place of those: auto chooses among every budget any of them measured, at the latest cost.
    Written beside ``out``; the path is returned."""
    given = list(given) if isinstance(given, (list, tuple)) else [given]
    merged = merge_rows([table_rows(Path(t)) for t in given] + [list(rows)])
    path = out.with_name(f"{out.stem}.auto-table.json")
    path.write_text(json.dumps({"meta": {"from": [str(g) for g in given] + [str(out)]}, "rows": merged}, indent=1))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, help="a qwen36_shapes.py output folder (target/, drafter/, shapes.json)")
    ap.add_argument("--target-path")
    ap.add_argument("--drafter-path")
    ap.add_argument("--configs", nargs="+",
                    default=["no-spec", "DFLASH"] + [f"DDTREE-{b}" for b in (8, 16, 32, 64, 128, 256)])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1,
                    help="timed passes per concurrency in each engine (the row reports the median; with more "
                         "than one, every round's ms per step too: the spread inside one engine)")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed passes, per concurrency: device time per decode step by kernel, from "
                         "two traced passes of sglang's profiler (the row's 'profile'; not part of the timing)")
    ap.add_argument("--phases", action="store_true",
                    help="DDTREE configurations: device ms per decode step and phase from CUDA events "
                         "(SGLANG_DDTREE_PHASE_TIMING=1; the row's 'phase_ms'; the events are never waited for in "
                         "the step)")
    ap.add_argument("--sync-check", action="store_true",
                    help="DDTREE configurations: report each host synchronisation site inside the decode step "
                         "(SGLANG_DDTREE_SYNC_CHECK=1; the row's 'host_syncs', counts per site; the watch costs "
                         "host time, so time without it)")
    ap.add_argument("--engine-arg", action="append", default=[], help="KEY=JSON extra Engine argument")
    ap.add_argument("--ddtree-arg", action="append", default=[],
                    help="KEY=JSON extra Engine argument for the DDTREE configurations only")
    ap.add_argument("--config-arg", action="append", default=[], metavar="CONFIG:KEY=JSON",
                    help="extra Engine argument for the one configuration labelled CONFIG (after --engine-arg and "
                         "--ddtree-arg); with a repeat label, e.g. DDTREE-16@2:speculative_ddtree_tree_attention="
                         "'\"backend\"', two kernels of one configuration side by side in one sweep")
    ap.add_argument("--config-env", action="append", default=[], metavar="CONFIG:VAR=VALUE",
                    help="an environment variable of the plugin (sglang_ddtree.config) for the one configuration "
                         "labelled CONFIG, e.g. DDTREE-15@2:SGLANG_DDTREE_STEP_STATS_KERNEL=1: a developer "
                         "switch's A/B in one sweep")
    ap.add_argument("--deadline-s", type=float, default=1e9,
                    help="start no new configuration after this many seconds (partial results are kept)")
    ap.add_argument("--case-timeout-s", type=int, default=900, help="per-configuration limit (its own process)")
    ap.add_argument("--max-concurrency", action="append", default=[], metavar="CONFIG=N",
                    help="size CONFIG's engine for and measure it at concurrencies up to N only (the others are "
                         "recorded as over its cap); e.g. DFLASH=16: sglang's DFLASH cannot allocate its "
                         "per-token GDN scratch for 64 requests of the 27B on one H200")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--auto-table", type=Path, nargs="+",
                    help="DDTREE-auto's step-cost table: step_cost.py outputs measured earlier (e.g. the whole "
                         "budget sweep, when auto runs in a call of its own; several are merged in order, a later "
                         "table's row replacing an earlier one's), with this sweep's rows measured before auto in "
                         "place of theirs; default: this sweep's own rows measured before DDTREE-auto")
    ap.add_argument("--pin", nargs="+", default=[], metavar="CHOICE",
                    help="DDTREE-auto's engine also serves these fixed choices ('chain' or budgets of its table), "
                         "each pinned for its own rows (DDTREE-auto=CHOICE) after auto's at every concurrency "
                         "(SGLANG_DDTREE_BENCH_PIN): one engine for several DDTREE configurations")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    # (A child measures one configuration at the concurrencies its parent chose.)
    caps = {} if a.child else parse_caps(a.max_concurrency, a.configs)
    check_configs(a.configs, "step_cost.py")
    if not a.child:
        check_auto_table(a.configs, a.auto_table)
        if a.pin and not a.auto_table:
            raise SystemExit("step_cost.py: --pin needs --auto-table (the table DDTREE-auto's engine is built over)")
        check_pins(a.pin, a.configs, a.auto_table, "step_cost.py")
    import torch

    target, drafter = engine_paths(a)
    shapes = a.models / "shapes.json" if a.models else None
    with_floor = bool(shapes and shapes.exists() and not a.child)
    facts = device_facts(with_floor) if not a.child else {"device": "cuda" if torch.cuda.is_available() else "cpu"}
    meta = {"target": target, "drafter": drafter, "prompt_len": a.prompt_len, "decode_tokens": a.decode_tokens,
            "device": facts["device"]}
    vocab = json.loads(Path(target, "config.json").read_text())["vocab_size"]
    if with_floor:
        wb = json.loads(shapes.read_text())["weight_bytes"]
        bw = facts["copy_bandwidth_gbs"]
        bw = float("nan") if bw is None else bw
        meta.update(weight_bytes=wb, copy_bandwidth_gbs=round(bw, 1),
                    floor_ms_target=round(wb["target"] / (bw * 1e9) * 1e3, 3) if bw == bw else None)
    extra = {k: json.loads(v) for k, v in (e.split("=", 1) for e in a.engine_arg)}
    ddtree_extra = {k: json.loads(v) for k, v in (e.split("=", 1) for e in a.ddtree_arg)}
    per_config = parse_config_args(a.config_arg, a.configs, child=a.child)
    per_env = {} if a.child else parse_config_env(a.config_env, a.configs)
    meta.update(engine_args=extra, ddtree_args=ddtree_extra)
    if per_config:
        meta["config_args"] = per_config
    if per_env:
        meta["config_env"] = per_env
    if a.phases:
        enable_phase_timing()
    if a.sync_check:
        from sglang_ddtree.config import SYNC_CHECK

        os.environ[SYNC_CHECK.name] = "1"
    if a.child:  # one configuration, in this process
        rows = measure(target, drafter, a.configs[0], a.concurrency, a.prompt_len, a.decode_tokens, vocab,
                       extra, ddtree_extra, str(a.auto_table[-1]) if a.auto_table else None, rounds=max(1, a.rounds),
                       profile=a.profile, config_extra=per_config.get(a.configs[0]),
                       on_row=lambda done: a.out.write_text(json.dumps(done)), pins=a.pin)
        a.out.write_text(json.dumps(rows))
        return 0
    rows = []
    t0 = time.time()
    for cfg in a.configs:
        conc = sweep_concurrency(cfg, a.concurrency, caps, meta, time.time() - t0 > a.deadline_s, "step_cost")
        if conc is None:
            continue
        # Each configuration in its own process: a scheduler that dies (e.g. out of memory at a
        # size that does not fit) signals its parent, which must not take the sweep down.
        one = a.out.with_name(f"{a.out.stem}.{cfg}.json")
        # The sweep's own arguments, then this configuration's: argparse keeps the last value.
        cmd = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--configs", cfg, "--out", str(one),
               "--concurrency", *map(str, conc), "--child", "--auto-table", str(a.out.resolve())]
        if base_config(cfg) == "DDTREE-auto" and a.auto_table is not None:
            merged = merge_auto_table(a.auto_table, rows, a.out)
            meta["auto_table"] = {"given": [str(t) for t in a.auto_table], "merged": merged.name}
            cmd[-1] = str(merged.resolve())
        one.unlink(missing_ok=True)
        try:
            rc = subprocess.run(cmd, timeout=a.case_timeout_s, start_new_session=True,
                                env={**os.environ, **per_env.get(cfg, {})}).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        got, failure = collect_child(rc, one)
        rows += got
        if failure is not None:
            meta.setdefault("failed", {})[cfg] = failure
            print(f"[step_cost] {cfg} failed: rc={failure}", flush=True)
        a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    base = {r["concurrency"]: r["ms_per_step"] for r in rows if r["config"] == "DFLASH"}
    for r in rows:
        if r["concurrency"] in base:
            r["vs_dflash_step"] = round(r["ms_per_step"] / base[r["concurrency"]], 3)
    a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
