"""``--speculative-ddtree-*`` flags, in sglang's own ServerArgs style.

sglang has no seam for plugin flags: ``ServerArgs``'s fields drive both the CLI
(``add_cli_args_from_dataclass``) and ``sglang.Engine(**kwargs)``. The plugin therefore swaps in
:class:`DDTreeServerArgs`, a subclass with our fields, through a ``HookRegistry`` class REPLACE on
``sglang.srt.server_args.ServerArgs`` (which also rebinds every module that imported the name)
plus ``Engine.server_args_class`` (a class attribute the propagation cannot reach):
``compat/server_args_class.py``. The subclass is a record of the same kind as ``ServerArgs`` on
each supported release (a dataclass on 0.5.17, a msgspec Struct on 0.5.23: ``compat/releases.py``).
Values are validated when ``--speculative-algorithm DDTREE`` is resolved
(:func:`validate_ddtree_args`).
"""

from __future__ import annotations

import functools
import logging
from typing import Annotated as A
from typing import Optional

from sglang.srt.arg_groups.arg_utils import NS
from sglang.srt.server_args import ServerArgs

from .compat import releases
from .compat.releases import CURRENT, finish_server_args_class, record_fields
from .config import WY_CHECK
from .core.budget_choice import StepCostTable
from .core.widths import WidthCaps, policy_width_caps, verify_width

logger = logging.getLogger(__name__)

ALGORITHM = "DDTREE"
# Budget 15 verifies 16 positions, the width of sglang's DFLASH step: cheaper per step than 16
# by more than the acceptance 16 adds, and 32 costs more step time than it adds
# (benchmark/ddtree/RESULTS.md: step cost and acceptance tables).
DEFAULT_BUDGET = 15
DEFAULT_TOPK = 8
MAX_BUDGET = 1024
# Marked on a ServerArgs while a release that resolves in ``__post_init__`` resolves it (see
# DDTreeServerArgs.__post_init__): whether --mem-fraction-static was given (sglang fills it in, so
# afterwards an automatic value cannot be told from a given one). Absent: treated as given.
FRACTION_GIVEN = "_ddtree_mem_fraction_given"


class DDTreeServerArgs(ServerArgs):
    """sglang's ``ServerArgs`` with the ``--speculative-ddtree-*`` fields (made a record of
    ``ServerArgs``' own kind by ``compat.releases.finish_server_args_class`` below)."""

    speculative_ddtree_budget: A[
        Optional[str],
        f"DDTREE: draft-tree node budget per request per step (root not counted). Default {DEFAULT_BUDGET}; "
        f"1..{MAX_BUDGET}, or 'auto': per step from the batch size, the measured step cost "
        "(--speculative-ddtree-step-cost) and the running acceptance, with the chain as fallback.",
        NS("spec"),
    ] = None
    speculative_ddtree_topk: A[
        Optional[int],
        f"DDTREE: candidates per draft depth (caps siblings per node). Default {DEFAULT_TOPK}.",
        NS("spec"),
    ] = None
    speculative_ddtree_max_depth: A[
        Optional[int],
        "DDTREE: deepest tree level (default: the drafter's block size - 1).",
        NS("spec"),
    ] = None
    speculative_ddtree_debug_jsonl: A[
        Optional[str],
        "DDTREE: write one JSON line per step per request (tree, accepted path, timings) to this path.",
        NS("spec"),
    ] = None
    speculative_ddtree_shadow_linear: A[
        bool,
        "DDTREE: also compute what the DFLASH chain (rank-0 drafts) would have accepted each step and report "
        "both (/server_info ddtree.shadow_chain, Prometheus, debug JSONL).",
        NS("spec"),
    ] = False
    speculative_ddtree_oracle_rate: A[
        float,
        "DDTREE: fraction of steps re-checked by a sequential target replay of the accepted path (0 in production).",
        NS("spec"),
    ] = 0.0
    speculative_ddtree_step_cost: A[
        Optional[str],
        "DDTREE with --speculative-ddtree-budget auto: the step-cost table (JSON written by "
        "benchmark/ddtree/step_cost.py on this model and GPU: DDTREE-<budget> rows, and DDTREE-chain for "
        "the chain fallback). The largest budget in it sets the verify width.",
        NS("spec"),
    ] = None
    speculative_ddtree_gdn_mode: A[
        Optional[str],
        "DDTREE on hybrid (GatedDeltaNet) targets: how the tree verify keeps linear-attention "
        "state. 'snapshot': sglang's per-node state path (one intermediate state per tree node). "
        "'wy': the snapshot-free tree kernels (no per-node state; faster at every measured budget "
        "and concurrency). Default: wy, except snapshot with --mamba-radix-cache-strategy no_buffer.",
        NS("spec"),
    ] = None
    speculative_ddtree_eager_verify: A[
        bool,
        "DDTREE: run the tree verify eagerly instead of replaying CUDA graphs captured with the tree mask "
        "(for debugging; the target's verify graphs are then not captured).",
        NS("spec"),
    ] = False
    speculative_ddtree_allow_slow_kernels: A[
        bool,
        "DDTREE on a GPU where its CUDA tree kernels cannot load (no prebuilt build for this torch and GPU, "
        "and no toolkit for the JIT build): serve with the torch tree builder and the Triton commit (slower) "
        "instead of refusing to start.",
        NS("spec"),
    ] = False
    speculative_ddtree_tree_attention: A[
        str,
        "DDTREE: the kernel of the tree verify's and the drafter block's attention. 'split-kv': sglang-ddtree's "
        "Triton kernel, the committed context split across programs (--attention-backend triton only); "
        "'backend': the attention backend's own kernels; 'auto' (default): split-kv on the triton backend, "
        "else backend.",
        NS("spec"),
    ] = "auto"
    speculative_ddtree_gemm_table: A[
        str,
        "DDTREE: few-token linear layers (the tree verify's and the drafter's) through sglang-ddtree's Triton "
        "product wherever a table measured it faster than cuBLAS on this GPU. 'auto' (default): the table "
        "shipped for this GPU model (sglang_ddtree/kernels/gemm_tables/), else cuBLAS everywhere; 'none': cuBLAS "
        "everywhere (sglang's path); or the path of a table written on this GPU by "
        "benchmark/ddtree/bench_skinny_gemm.py.",
        NS("spec"),
    ] = "auto"

    def __post_init__(self):
        """sglang's own construction step, then the refusal of DDTREE flags without
        ``--speculative-algorithm DDTREE`` (ValueError naming them). On a release that resolves
        the arguments in this step, whether ``--mem-fraction-static`` was given is marked on the
        record (``FRACTION_GIVEN``) while it runs, for the verify-memory reserve that DDTREE's
        handling makes inside it; the mark is removed after, since ``vars(server_args)`` is what
        /server_info reports there."""
        if CURRENT.resolves_in_post_init:
            self.__dict__[FRACTION_GIVEN] = self.mem_fraction_static is not None
            try:
                super().__post_init__()
            finally:
                self.__dict__.pop(FRACTION_GIVEN, None)
        else:
            super().__post_init__()
        reject_ddtree_flags_without_ddtree(self)


DDTreeServerArgs = finish_server_args_class(DDTreeServerArgs)


DDTREE_FLAGS = (
    "speculative_ddtree_budget",
    "speculative_ddtree_topk",
    "speculative_ddtree_max_depth",
    "speculative_ddtree_debug_jsonl",
    "speculative_ddtree_shadow_linear",
    "speculative_ddtree_oracle_rate",
    "speculative_ddtree_gdn_mode",
    "speculative_ddtree_step_cost",
    "speculative_ddtree_eager_verify",
    "speculative_ddtree_allow_slow_kernels",
    "speculative_ddtree_tree_attention",
    "speculative_ddtree_gemm_table",
)
TREE_ATTENTION = ("auto", "split-kv", "backend")
# Attention backends whose target-verify kernels apply the verify input's ``custom_mask`` to a
# DFLASH-family input (topk 1), so the tree mask reaches them: triton and flashinfer on GPUs,
# intel_amx on CPU. The others (fa3, fa4, trtllm_mha, ...) read a mask only on EAGLE's topk > 1
# path and would let every tree node attend to every other; they are refused.
TREE_MASK_BACKENDS = ("triton", "flashinfer", "intel_amx")
# How a hybrid target's GatedDeltaNet layers verify the tree (--speculative-ddtree-gdn-mode).
GDN_SNAPSHOT, GDN_WY = "snapshot", "wy"
GDN_MODES = (GDN_SNAPSHOT, GDN_WY)


def default_gdn_mode(server_args) -> str:
    """``wy`` unless the radix cache runs sglang's ``no_buffer`` strategy (asked for by name),
    where a rerun from a cached prefix has not been shown equal to DFLASH's: ``snapshot`` there."""
    if getattr(server_args, "disable_radix_cache", False):
        return GDN_WY
    return GDN_SNAPSHOT if getattr(server_args, "mamba_radix_cache_strategy", None) == "no_buffer" else GDN_WY


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def ddtree_flags_set(server_args) -> list:
    """Flags given a non-default value (to reject them without --speculative-algorithm DDTREE)."""
    out = []
    for f in record_fields(DDTreeServerArgs):
        if f.name in DDTREE_FLAGS and getattr(server_args, f.name, f.default) != f.default:
            out.append(_flag(f.name))
    return out


def reject_ddtree_flags_without_ddtree(server_args) -> None:
    """ValueError naming the DDTREE flags given without ``--speculative-algorithm DDTREE``."""
    if not is_ddtree(server_args):
        flags = ddtree_flags_set(server_args)
        if flags:
            raise ValueError(
                f"{', '.join(flags)} require(s) --speculative-algorithm DDTREE "
                f"(got --speculative-algorithm {server_args.speculative_algorithm})."
            )


# DFlash2 drafters (sglang 0.5.23): a DFlash backbone plus a learned candidate selector that picks
# each position's draft among the target head's top-k; DDTREE builds its tree from the backbone's
# per-depth top-K and would leave the selector unused.
DFLASH2_ARCHITECTURES = ("DFlash2DraftModel", "DFlash2BeamDraftModel", "MiniMaxDFlash2DraftModel")


def refuse_dflash2_drafter(architectures) -> None:
    """ValueError naming the flag when the drafter declares a DFlash2 architecture."""
    found = sorted(set(architectures or ()) & set(DFLASH2_ARCHITECTURES))
    if found:
        raise ValueError(
            f"--speculative-draft-model-path is a DFlash2 drafter ({', '.join(found)}): DDTREE builds its tree "
            "from a DFlash drafter's per-depth top-K and does not use a DFlash2 candidate selector yet. Serve it "
            "with --speculative-algorithm DFLASH, or give DDTREE a DFlash drafter (DFlashDraftModel).")


def drafter_architectures(server_args) -> list:
    """The ``architectures`` of the drafter's config (``--speculative-draft-model-path``)."""
    from sglang.srt.utils.hf_transformers_utils import get_config

    cfg = get_config(server_args.speculative_draft_model_path,
                     trust_remote_code=bool(getattr(server_args, "trust_remote_code", False)))
    return list(getattr(cfg, "architectures", None) or [])


def validate_ddtree_args(server_args, block_size: int) -> None:
    """Resolve defaults and reject bad values / unsupported combinations, naming the flag."""
    if server_args.speculative_ddtree_budget is None:
        server_args.speculative_ddtree_budget = DEFAULT_BUDGET
    _resolve_budget(server_args)
    if server_args.speculative_ddtree_topk is None:
        server_args.speculative_ddtree_topk = DEFAULT_TOPK
    if server_args.speculative_ddtree_max_depth is None:
        server_args.speculative_ddtree_max_depth = block_size - 1
    b = server_args.speculative_ddtree_budget
    if not 1 <= int(b) <= MAX_BUDGET:
        raise ValueError(f"--speculative-ddtree-budget must be in 1..{MAX_BUDGET}, got {b}.")
    k = server_args.speculative_ddtree_topk
    if int(k) < 1:
        raise ValueError(f"--speculative-ddtree-topk must be >= 1, got {k}.")
    d = server_args.speculative_ddtree_max_depth
    if not 1 <= int(d) <= block_size - 1:
        raise ValueError(
            f"--speculative-ddtree-max-depth must be in 1..{block_size - 1} (the drafter's block "
            f"size is {block_size}), got {d}."
        )
    r = server_args.speculative_ddtree_oracle_rate
    if not 0.0 <= float(r) <= 1.0:
        raise ValueError(f"--speculative-ddtree-oracle-rate must be in [0, 1], got {r}.")
    if float(r) > 0 and int(server_args.page_size or 1) != 1:
        raise ValueError(
            "--speculative-ddtree-oracle-rate needs --page-size 1 (its replay writes to scratch KV slots "
            f"allocated token by token); got --page-size {server_args.page_size}: remove the oracle rate.")
    if getattr(server_args, "mamba_radix_cache_strategy", None) == "extra_buffer_lazy":
        # The lazy strategy plans its tracking slots in sglang's prepare_for_decode for the
        # chain workers it knows; DDTREE's tree verify and commit write the eager ping-pong slot.
        raise ValueError("--speculative-algorithm DDTREE does not support --mamba-radix-cache-strategy "
                         "extra_buffer_lazy; use extra_buffer (or auto) instead.")
    check_attention_backends(server_args)
    ta = server_args.speculative_ddtree_tree_attention
    if ta not in TREE_ATTENTION:
        raise ValueError(f"--speculative-ddtree-tree-attention must be one of {', '.join(TREE_ATTENTION)}, got {ta!r}.")
    backend = server_args.attention_backend
    if ta == "split-kv" and backend not in (None, "triton"):
        raise ValueError(f"--speculative-ddtree-tree-attention split-kv runs on --attention-backend triton, got "
                         f"--attention-backend {backend}: use --speculative-ddtree-tree-attention backend (or auto).")
    from .kernels.gemm_table import check_flag

    check_flag(server_args.speculative_ddtree_gemm_table)
    mode = server_args.speculative_ddtree_gdn_mode
    if mode is None:
        server_args.speculative_ddtree_gdn_mode = mode = default_gdn_mode(server_args)
        logger.info("DDTREE: hybrid targets' GatedDeltaNet state: --speculative-ddtree-gdn-mode %s (default%s)", mode,
                    "; the radix cache's no_buffer strategy is on: wy is faster, see README"
                    if mode == GDN_SNAPSHOT else "")
    if mode not in GDN_MODES:
        raise ValueError(f"--speculative-ddtree-gdn-mode must be one of {', '.join(GDN_MODES)}, got {mode!r}.")
    if mode == GDN_WY and not server_args.speculative_ddtree_eager_verify and WY_CHECK.get():
        # The cross-check runs sglang's per-node verify in Python beside ours: not in a graph.
        raise ValueError(f"{WY_CHECK.name}=1 needs the eager tree verify: add --speculative-ddtree-eager-verify "
                         f"(or unset {WY_CHECK.name}).")


def check_attention_backends(server_args, defaulted: bool = False) -> None:
    """Refuse a target attention backend that would not apply the tree mask, naming the flag:
    at launch for the flags given, and again when the worker starts, after sglang resolved its
    default (``defaulted``: say so)."""
    server_args = releases.resolved(server_args)
    for flag in ("attention_backend", "decode_attention_backend", "prefill_attention_backend"):
        b = getattr(server_args, flag, None)
        if b is not None and b not in TREE_MASK_BACKENDS:
            raise ValueError(
                f"--speculative-algorithm DDTREE needs an attention backend that applies the tree mask "
                f"({TREE_MASK_BACKENDS[0]} or {TREE_MASK_BACKENDS[1]}); got --{flag.replace('_', '-')} {b}"
                f"{' (sglang chose it for this GPU and model)' if defaulted else ''}: "
                f"add --attention-backend triton (or flashinfer).")


def _resolve_budget(server_args) -> None:
    """An integer budget, or 'auto' with a readable step-cost table: then the budget field becomes
    the table's largest budget (the verify width is sized by it) and the table drives each step."""
    b = server_args.speculative_ddtree_budget
    table = server_args.speculative_ddtree_step_cost
    if isinstance(b, str) and b.strip().lower() == "auto":
        if not table:
            raise ValueError("--speculative-ddtree-budget auto needs --speculative-ddtree-step-cost PATH "
                             "(a table from benchmark/ddtree/step_cost.py for this model and GPU).")
        try:
            budgets = StepCostTable.from_json(table).budgets()
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"--speculative-ddtree-step-cost {table}: not a step-cost table ({e!r}).") from e
        if not budgets:
            raise ValueError(f"--speculative-ddtree-step-cost {table}: no DDTREE-<budget> rows.")
        server_args.speculative_ddtree_budget = max(budgets)
        return
    try:
        server_args.speculative_ddtree_budget = int(b)
    except (TypeError, ValueError):
        raise ValueError(f"--speculative-ddtree-budget must be an integer in 1..{MAX_BUDGET} or 'auto', got {b!r}.")
    if table:
        raise ValueError("--speculative-ddtree-step-cost is used only with --speculative-ddtree-budget auto; "
                         "remove it or set the budget to auto.")


def validate_ddtree_parallelism(server_args) -> None:
    """Checks that must run before DFLASH's own handling (which has vaguer messages)."""
    if server_args.pp_size != 1:
        raise ValueError(
            "DDTREE does not support pipeline parallelism: set --pp-size 1 "
            f"(got {server_args.pp_size})."
        )


def split_kv_tree_attention(server_args) -> bool:
    """Whether a DDTREE server's triton attention backend runs the tree verify's attention with
    sglang-ddtree's split-KV kernel (``--speculative-ddtree-tree-attention`` auto or split-kv)."""
    server_args = releases.resolved(server_args)
    return is_ddtree(server_args) and getattr(server_args, "speculative_ddtree_tree_attention", "auto") != "backend"


def is_ddtree(server_args) -> bool:
    """Whether ``server_args`` (any object with ``speculative_algorithm``) selects DDTREE."""
    server_args = releases.resolved(server_args)
    return str(getattr(server_args, "speculative_algorithm", None) or "").upper() == ALGORITHM


def published_server_args():
    """The server args the scheduler publishes before it builds pools and graphs (None where
    none are published: not a serving process)."""
    from sglang.srt.runtime_context import get_server_args

    try:
        return releases.resolved(get_server_args())
    except ValueError:
        return None


def is_ddtree_server() -> bool:
    """Whether this process serves DDTREE (from the published server args)."""
    return is_ddtree(published_server_args())


def eager_verify(server_args=None) -> bool:
    """Whether DDTREE tree verifies run eagerly (``--speculative-ddtree-eager-verify``) on a DDTREE
    server (``server_args`` default: the published ones); False on other servers."""
    sa = published_server_args() if server_args is None else releases.resolved(server_args)
    return is_ddtree(sa) and bool(getattr(sa, "speculative_ddtree_eager_verify", False))


def wy_server(server_args=None) -> bool:
    """Whether ``server_args`` (default: the published ones) serve DDTREE with
    ``--speculative-ddtree-gdn-mode wy``."""
    sa = published_server_args() if server_args is None else releases.resolved(server_args)
    return is_ddtree(sa) and getattr(sa, "speculative_ddtree_gdn_mode", None) == GDN_WY


_HYBRID_MODEL_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


def is_hybrid_target(server_args) -> bool:
    """Whether the target has linear-attention (GatedDeltaNet) layers."""
    cfg = releases.model_config(server_args).hf_config
    text = getattr(cfg, "text_config", None) or cfg
    layer_types = getattr(text, "layer_types", None) or []
    model_type = getattr(text, "model_type", None) or getattr(cfg, "model_type", None)
    return "linear_attention" in layer_types or model_type in _HYBRID_MODEL_TYPES


def drafter_block_size(draft_hf_config) -> int:
    """The DFlash drafter's block size, from its own config (16 when the config is silent)."""
    from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

    return int(parse_dflash_draft_config(draft_hf_config=draft_hf_config).resolve_block_size(default=16))


@functools.lru_cache(maxsize=1)
def published_drafter_block_size() -> int:
    """The drafter block size of this process's server (read from the drafter's config once)."""
    from sglang.srt.runtime_context import get_spec
    from sglang.srt.utils.hf_transformers_utils import get_config

    return drafter_block_size(get_config(get_spec().speculative_draft_model_path, trust_remote_code=False))


def ddtree_width_caps(server_args, block_size: int) -> WidthCaps:
    """Budget auto's verify widths and their batch-size caps (``core.widths.policy_width_caps``)
    for a resolved DDTREE server; empty for a fixed budget (its one width serves every batch)."""
    server_args = releases.resolved(server_args)
    if not server_args.speculative_ddtree_step_cost:
        return {}
    return policy_width_caps(StepCostTable.from_json(server_args.speculative_ddtree_step_cost),
                             int(server_args.speculative_ddtree_max_depth), block_size)


def ddtree_verify_widths(server_args, block_size: int, caps: Optional[WidthCaps] = None) -> list:
    """Every verify width a resolved DDTREE server verifies at: the budget's, or under budget
    auto the keys of ``caps`` (default: :func:`ddtree_width_caps`)."""
    server_args = releases.resolved(server_args)
    caps = ddtree_width_caps(server_args, block_size) if caps is None else caps
    return sorted(caps) if caps else [verify_width(server_args.speculative_ddtree_budget, block_size)]
