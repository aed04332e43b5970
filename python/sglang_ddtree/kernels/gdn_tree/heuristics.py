"""Launch choices of the tree kernels: the verify's implementation, tiles and launch options,
and the tree conv's tiling, for the options a caller leaves to the kernels (``None`` / "auto").

Every choice is a row of :data:`RULES`; for each option the first row whose condition holds
gives the value. Capabilities are not rules: without a CUDA device (the Triton interpreter)
the verify runs "fused" with no register limit, and PDL needs compute capability 9.0+.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Callable, NamedTuple, Optional

import torch
import triton

# Shared memory the 64-node pair-product tile asks for, with margin (bytes): with fp32 operands
# and with raw bf16 ones (AOT-compiled for sm_90 / sm_120: 128 KiB and 52 / 48 KiB).
QK64_SMEM = 160 * 1024
QK64_SMEM_RAW16 = 64 * 1024


@dataclass(frozen=True)
class Case:
    """What the rules read. ``nodes``: nodes per tree (root included); ``bs``: trees; ``chunks``:
    the verify's node chunks of ``block_t``; ``programs``: verify programs of 64-wide value
    tiles, ``bs * HV * ceil(V / 64)``; ``apply_programs``: the "twostage" apply grid at the
    chosen value tile; ``sms``: the GPU's multiprocessors; ``qk64_fits``: the 64-node pair tile
    fits the GPU's shared memory per block; ``impl`` / ``block_v``: choices already made."""
    nodes: int = 0
    bs: int = 0
    chunks: int = 0
    programs: int = 0
    apply_programs: int = 0
    sms: int = 0
    qk64_fits: bool = False
    impl: str = ""
    block_v: int = 0


class Rule(NamedTuple):
    option: str
    value: object
    when: Callable[[Case], bool]


def _twostage(c: Case) -> bool:
    return c.impl == "twostage"


def _always(c: Case) -> bool:
    return True


def _under_sms(c: Case) -> bool:
    return c.programs < c.sms


# Measured on an H200 (132 SMs) at Qwen3.6-27B's GDN shapes (48 layers, bf16, depth bound 15), the
# pairs_in_prep row of "fused" on an H100: benchmark/ddtree/RESULTS.md section 2.
RULES = (
    #    option           value       when
    Rule("impl",          "fused",    lambda c: c.chunks <= 1),                       # chains: one node chunk
    Rule("impl",          "twostage", lambda c: c.nodes - 1 <= block_chunk(c.nodes)),  # the root + at most 64
    Rule("impl",          "split",    _under_sms),
    Rule("impl",          "fused",    _always),
    Rule("block_v",       32,         lambda c: _twostage(c) and c.nodes > 33),
    Rule("block_v",       32,         lambda c: _twostage(c) and c.nodes <= 17 and _under_sms(c)),
    Rule("block_v",       64,         _always),
    Rule("qk_block",      64,         lambda c: _twostage(c) and c.qk64_fits and c.bs * c.nodes >= 528),
    Rule("qk_block",      16,         _twostage),
    Rule("qk_block",      None,       _always),                                       # the verify's block_t
    Rule("pairs_in_prep", True,       lambda c: _twostage(c) and c.nodes > 33),
    Rule("pairs_in_prep", True,       lambda c: c.impl == "fused" and c.chunks == 1),
    Rule("pairs_in_prep", False,      _always),
    Rule("pdl",           True,       lambda c: _twostage(c) and c.apply_programs <= 3 * c.sms),
    Rule("pdl",           False,      _always),
    Rule("max_registers", 168,        lambda c: _twostage(c) and c.nodes > 33 and c.block_v == 32
                                                and c.programs >= 4 * c.sms),
    Rule("max_registers", 0,          _always),                                       # the compiler's own
    Rule("conv_flat",     True,       lambda c: c.bs > 1),
    Rule("conv_flat",     False,      _always),
)
OPTIONS = tuple(dict.fromkeys(r.option for r in RULES))


def choose(option: str, case: Case):
    """The value of ``option`` for ``case``: the first row of :data:`RULES` for it that holds."""
    for rule in RULES:
        if rule.option == option and rule.when(case):
            return rule.value
    raise KeyError(f"no rule for {option!r}; options: {OPTIONS}")


def _sms(dev) -> int:
    return torch.cuda.get_device_properties(dev).multi_processor_count


def _programs(bs: int, num_v_heads: int, v_dim: int) -> int:
    return bs * num_v_heads * triton.cdiv(v_dim, 64)


def block_chunk(n_nodes: int) -> int:
    """impl "twostage": the tile of the non-root nodes (a power of two, 16 .. 64); the impl
    serves trees of at most ``block_chunk(n) + 1`` nodes."""
    return min(64, max(16, triton.next_power_of_2(max(1, n_nodes - 1))))


def pick_impl(bs: int, n_nodes: int, num_v_heads: int, v_dim: int, device, block_t: int = 16,
              raw16: bool = True):
    """``(impl, block_v, qk_block)`` for ``impl="auto"`` (``qk_block`` None: the verify's own
    default). ``raw16``: the pair products take raw bf16 q/k (smaller shared-memory tile). Not
    on a CUDA device: ``("fused", 64, None)``."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return "fused", 64, None
    props = torch.cuda.get_device_properties(dev)
    smem = QK64_SMEM_RAW16 if raw16 else QK64_SMEM
    case = Case(nodes=n_nodes, bs=bs, chunks=triton.cdiv(n_nodes, block_t),
                programs=_programs(bs, num_v_heads, v_dim), sms=props.multi_processor_count,
                qk64_fits=getattr(props, "shared_memory_per_block_optin", 0) >= smem)
    case = replace(case, impl=choose("impl", case))
    return case.impl, choose("block_v", case), choose("qk_block", case)


def prep_forms_pairs(impl: str, n_nodes: int, chunks: int = 0) -> bool:
    """``pairs_in_prep`` when left ``None``: whether the node-pair products are formed where they
    are used (the "twostage" prep, or the "fused" walk of a tree of one node chunk: ``chunks``,
    the verify's node chunks) rather than by the pair kernel."""
    return choose("pairs_in_prep", Case(impl=impl, nodes=n_nodes, chunks=chunks))


def apply_as_dependent(impl: str, apply_programs: int, device) -> bool:
    """``pdl`` when left ``None``: whether the "twostage" apply pass (a grid of
    ``apply_programs``) launches as a programmatic dependent of its prep; False where PDL
    cannot run (:func:`pdl_unavailable`)."""
    dev = torch.device(device)
    if impl != "twostage" or pdl_unavailable(dev) is not None:
        return False
    return choose("pdl", Case(impl=impl, apply_programs=apply_programs, sms=_sms(dev)))


def register_limit(impl: str, n_nodes: int, bs: int, num_v_heads: int, v_dim: int, block_v: int, device) -> int:
    """``max_registers`` when left ``None``: the register limit per thread of the "twostage"
    kernels (0: the compiler's own, 255 at 4 warps); 0 without a CUDA device or in the
    interpreter."""
    dev = torch.device(device)
    if impl != "twostage" or dev.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return 0
    return choose("max_registers", Case(impl=impl, nodes=n_nodes, block_v=block_v,
                                        programs=_programs(bs, num_v_heads, v_dim), sms=_sms(dev)))


def conv_flat(bs: int) -> bool:
    """``tree_conv(flat=None)``: node tiles over the flattened batch rather than per tree."""
    return choose("conv_flat", Case(bs=bs))


def pdl_unavailable(dev) -> Optional[str]:
    """Why programmatic dependent launch cannot run on ``dev`` (None: it can): it needs a CUDA
    device of compute capability 9.0+, not the CPU interpreter."""
    dev = torch.device(dev)
    if os.environ.get("TRITON_INTERPRET") == "1" or dev.type != "cuda":
        return "needs a CUDA GPU, not the interpreter"
    major, minor = torch.cuda.get_device_capability(dev)
    if major < 9:
        return f"needs compute capability 9.0+, this GPU is {major}.{minor}"
    return None
