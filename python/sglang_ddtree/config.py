"""Every environment variable sglang-ddtree reads, declared once, typed and marked.

What users set is a ``--speculative-ddtree-*`` flag (``server_args.py``); environment variables
are for where no flag reaches:

- ``product``: a deployment may set it (where prebuilt kernels live);
- ``developer``: diagnostics and build switches for people working on this package;
- ``test``: read only by the test suite, the test plugin (``testing/``) and the GPU runner.

Read a variable through its declaration (``WY_CHECK.get()``), never through ``os.environ``
directly: ``test_config.py`` fails on any ``SGLANG_DDTREE_*`` name read elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Optional, Union

Value = Union[str, bool, int, None]
KINDS = ("product", "developer", "test")


@dataclass(frozen=True)
class EnvVar:
    """One variable: ``name``, ``kind`` (one of :data:`KINDS`), ``type`` ("str", "path", "bool"
    or "int"), its default when unset or empty, and what it does."""

    name: str
    kind: str
    type: str
    default: Value
    doc: str

    def get(self) -> Value:
        """The value from the process environment: "bool" accepts 0/1, "int" an integer; any
        other value raises ValueError naming the variable."""
        raw = os.environ.get(self.name)
        if raw is None or raw == "":
            return self.default
        if self.type == "bool":
            if raw not in ("0", "1"):
                raise ValueError(f"{self.name} must be 0 or 1, got {raw!r}")
            return raw == "1"
        if self.type == "int":
            try:
                return int(raw)
            except ValueError:
                raise ValueError(f"{self.name} must be an integer, got {raw!r}") from None
        return raw

    def is_set(self) -> bool:
        return bool(os.environ.get(self.name))


REGISTRY: Dict[str, EnvVar] = {}


def _declare(name: str, kind: str, type: str, default: Value, doc: str) -> EnvVar:
    if kind not in KINDS:
        raise ValueError(f"{name}: kind {kind!r} not in {KINDS}")
    var = EnvVar(name, kind, type, default, doc)
    REGISTRY[name] = var
    return var


# ----------------------------------------------------------------------------- product
PREBUILT_DIR = _declare(
    "SGLANG_DDTREE_PREBUILT_DIR", "product", "path", None,
    "Directory of the prebuilt CUDA tree-kernel extension (default: kernels/prebuilt inside the "
    "installed package); the extension is JIT-built from the packaged sources when none matches.")

# ----------------------------------------------------------------------------- developer
TREE_ATTN_MIN_BLOCKS = _declare(
    "SGLANG_DDTREE_TREE_ATTN_MIN_BLOCKS", "developer", "int", 0,
    "Key blocks per context range of the split-KV tree attention at least (0: the kernel's default); "
    "for comparing launch shapes in benchmarks.")
TREE_ATTN_PACK_GQA = _declare(
    "SGLANG_DDTREE_TREE_ATTN_PACK_GQA", "developer", "bool", False,
    "The split-KV tree attention packs each KV head's q heads into one program's rows (one pass over "
    "the keys per group); off until measured faster.")
WY_CHECK = _declare(
    "SGLANG_DDTREE_WY_CHECK", "developer", "bool", False,
    "Every tree GatedDeltaNet verify also runs sglang's per-node verify on the same inputs and logs "
    "the largest output and committed-state differences (needs --speculative-ddtree-eager-verify).")
GDN_COPIES = _declare(
    "SGLANG_DDTREE_GDN_COPIES", "developer", "bool", False,
    "A wy verify's GatedDeltaNet layers take sglang's projection copies and gated norm instead of reading "
    "the projections in place (compat/gdn_views.py off): the other side of that path's A/B measurement.")
VERBOSE_BUILD = _declare(
    "SGLANG_DDTREE_VERBOSE_BUILD", "developer", "bool", False,
    "Print the compiler commands of the CUDA tree-kernel JIT build.")
PHASE_TIMING = _declare(
    "SGLANG_DDTREE_PHASE_TIMING", "developer", "bool", False,
    "Record CUDA events around each phase of every DDTREE decode step (never waited for on the decode "
    "path) and report device ms per phase in /server_info ddtree.phase_timing "
    "(benchmark/ddtree/step_cost.py --phases).")
SYNC_CHECK = _declare(
    "SGLANG_DDTREE_SYNC_CHECK", "developer", "bool", False,
    "Watch every DDTREE decode step for host synchronisations (torch's CUDA sync-debug mode, 'warn', "
    "during the step): each synchronising site is logged once with its Python stack and counted in "
    "/server_info ddtree.host_syncs (benchmark/ddtree/step_cost.py --sync-check).")
STEP_STATS_KERNEL = _declare(
    "SGLANG_DDTREE_STEP_STATS_KERNEL", "developer", "bool", True,
    "With the CUDA tree kernels: a step's counters, shadow chain and budget-auto sums as one launch "
    "(kernels/csrc/ddtree_step_stats.cu); 0 runs their torch forms instead (an A/B).")
BENCH_PIN = _declare(
    "SGLANG_DDTREE_BENCH_PIN", "developer", "path", None,
    "Benchmarks: a file naming what every step of a --speculative-ddtree-budget auto engine verifies: "
    "'chain', one of its table's budgets, or 'auto' (the policy's choice; also while the file is absent "
    "or empty); re-read when it changes. A pinned step verifies as a fixed-budget engine's would (no "
    "profile update, no shadow chain), so one engine serves every fixed configuration beside auto "
    "(benchmark/ddtree/replay_bench.py --pin).")
BUILD_DIR = _declare(
    "SGLANG_DDTREE_BUILD_DIR", "developer", "path", None,
    "Where the tiny test models and the converted SmolLM2 demo target are cached (default: build/ "
    "in the checkout).")

# ----------------------------------------------------------------------------- test
PLUGIN_MARKER = _declare(
    "SGLANG_DDTREE_PLUGIN_MARKER", "test", "path", None,
    "File the plugin's register() appends '<pid> <ppid>' to, proving it ran in each spawned process.")
TEST_ORACLE = _declare(
    "SGLANG_DDTREE_TEST_ORACLE", "test", "path", None,
    "JSON file of the oracle drafter (testing/oracle_drafter.py): DDTREE drafts from the target's "
    "known continuation instead of the drafter.")
TEST_RECORD_TRACE = _declare(
    "SGLANG_DDTREE_TEST_RECORD_TRACE", "test", "path", None,
    "Directory of the trace recording mode (testing/trace_recording.py, benchmark/ddtree/record_traces.py): "
    "every DDTREE step commits only its bonus token and writes the drafter's per-depth top-K and the "
    "committed token there; needs --disable-overlap-schedule and greedy requests.")
BENCH_REPLAY = _declare(
    "SGLANG_DDTREE_BENCH_REPLAY", "test", "path", None,
    "Trace file (docs/traces.md) of the benchmark-only replay drafter (testing/trace_replay.py): DDTREE "
    "and DFLASH draft the trace's proposals and the target's token at every verified position is the "
    "trace's, while every forward runs at full size; refused unless the engine loads dummy weights "
    "(load_format dummy) or the tiny test models.")
TEST_EXTRA_BUFFER_ARCHS = _declare(
    "SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS", "test", "str", None,
    "Comma-separated architectures added to sglang's mamba extra-buffer sets (testing/extra_buffer_arch.py).")
TEST_NOMASK_CONTROL = _declare(
    "SGLANG_DDTREE_TEST_NOMASK_CONTROL", "test", "bool", False,
    "Negative control: the tree verify graphs are captured without the tree mask, so DDTREE output "
    "must differ from no speculation (testing/plugin.py).")
TEST_POOL_COUNTS = _declare(
    "SGLANG_DDTREE_TEST_POOL_COUNTS", "test", "bool", False,
    "/server_info internal_states[i].pool_counts: the scheduler's allocator counts (KV, request and "
    "linear-attention state pools) for leak checks from a client (testing/pool_counts.py).")
TEST_FP32_NORMS = _declare(
    "SGLANG_DDTREE_TEST_FP32_NORMS", "test", "bool", False,
    "RMSNorm, GemmaRMSNorm and RotaryEmbedding on CUDA run sglang's native torch paths for float32 "
    "inputs, and the GatedDeltaNet prefill (float32 refused upstream) runs a float32 torch prefill "
    "(testing/fp32_norms.py, testing/gdn_prefill_fp32.py): sgl_kernel's norm and rope kernels take bf16 / fp16 only, so a "
    "float32 tiny hybrid target and its DFlash drafter can serve on the GPU for exact lossless checks.")
TEST_FORK_CHILDREN = _declare(
    "SGLANG_DDTREE_TEST_FORK_CHILDREN", "test", "bool", False,
    "CPU test engines start sglang's scheduler and detokenizer by fork instead of spawn (testing/"
    "fork_children.py): the children skip re-importing sglang (~15 s of CPU per engine). Applied only on "
    "CPU, beside one OpenMP thread, only where the test plugin this process registered is the one the "
    "current environment asks for, and never with SGLANG_DDTREE_PLUGIN_MARKER (which proves the plugin "
    "runs in spawned children).")
TRITON_INTERP_CHILD = _declare(
    "SGLANG_DDTREE_TRITON_INTERP_CHILD", "test", "bool", False,
    "Set by the kernel tests in the child process they re-run themselves in under TRITON_INTERPRET=1.")
GPU_RESULTS = _declare(
    "SGLANG_DDTREE_GPU_RESULTS", "test", "path", None,
    "Where GPU test cases write results and logs (set by scripts/gpu_run.sh).")
GPU_CASES_DIR = _declare(
    "SGLANG_DDTREE_GPU_CASES_DIR", "test", "path", None,
    "GPU suite: evaluate the case results already in this directory instead of running the cases.")
GPU_REUSE = _declare(
    "SGLANG_DDTREE_GPU_REUSE", "test", "bool", False,
    "GPU cases: reuse a case's earlier result file instead of running it again.")
GPU_PARALLEL = _declare(
    "SGLANG_DDTREE_GPU_PARALLEL", "test", "int", 4,
    "GPU cases: engines started at once.")
GPU_CASE_TIMEOUT = _declare(
    "SGLANG_DDTREE_GPU_CASE_TIMEOUT", "test", "int", 480,
    "GPU cases: seconds one case may run.")
SITE = _declare(
    "SGLANG_DDTREE_SITE", "test", "path", "/tmp/sglang-ddtree-site",
    "scripts/gpu_run.sh: where the offline bundle is extracted on the GPU host.")
VENV = _declare(
    "SGLANG_DDTREE_VENV", "test", "path", ".venv",
    "scripts/setup_env.sh: the virtual environment to create or reuse.")


def wants_test_plugin() -> bool:
    """Whether any variable the test plugin acts on is set (``plugin.register`` then loads it)."""
    return any(v.is_set() for v in (TEST_ORACLE, TEST_RECORD_TRACE, BENCH_REPLAY, TEST_EXTRA_BUFFER_ARCHS,
                                    TEST_NOMASK_CONTROL, TEST_POOL_COUNTS, TEST_FORK_CHILDREN,
                                    TEST_FP32_NORMS))


def describe(kind: Optional[str] = None) -> str:
    """One line per variable (of ``kind``, or all): name, kind, default, what it does."""
    rows = [v for v in REGISTRY.values() if kind is None or v.kind == kind]
    return "\n".join(f"{v.name} [{v.kind}, {v.type}, default {v.default!r}]: {v.doc}" for v in rows)
