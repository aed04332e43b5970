"""A linear layer for few tokens (Triton), with the plain-torch reference beside it.

    x      [M, K]   bf16 / fp16, K contiguous, M <= 128
    weight [N, K]   x's dtype, K contiguous (a torch ``nn.Linear`` weight)
    bias   [N]      optional
    ->  y  [M, N]   x's dtype, contiguous: ``x @ weight.T + bias``, accumulated in fp32

With ``act="silu_mul"`` x is ``[M, 2K]`` (gate | up, an MLP's gate_up output) and the product
takes ``silu(gate) * up`` in its place, each element formed in fp32 and rounded to x's dtype as
sglang's ``SiluAndMul`` writes it: the MLP's down projection without the activation's own
kernel and its ``[M, K]`` round trip.

At M of a verify step (1 to a few tens of tokens) the product reads the weight once and is bound
by memory. The kernel walks the weight in tiles of ``[BN, BK]`` rows x columns, multiplies each by
the tokens' ``[BK, BM]`` slice (tensor cores, the tokens padded to BM), and splits K over
``SPLIT_K`` programs when N alone gives too few tiles to keep the card's memory busy: the partial
sums go to an fp32 workspace ``[SPLIT_K, M, N]`` that a second kernel adds in a fixed order (the
result does not depend on scheduling). With ``Config.tail`` a token count just past a tile
(17..32 past 16, 33..48 past 32, 65..80 past 64) is covered by that tile and a 16-token tail
tile multiplied by the same weight tile (e.g. 65 tokens as 64 + 16 instead of a 128-token tile:
fewer padded rows in shared memory and registers, so more stages fit). ``Config`` holds one
choice of tiles; ``skinny_linear`` takes one explicitly (the benchmark sweeps them per shape).
Raises ValueError for inputs outside this contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

MAX_M = 128
SILU_MUL = "silu_mul"  # act: silu(gate) * up formed inside the product
ACTS = (None, SILU_MUL)
# Config field -> its tag in Config.name(), in name order.
_NAME_TAGS = dict(BN="bn", BK="bk", split_k="sk", num_stages="st", num_warps="w")
TAIL = 16  # the tail tile's tokens (Config.tail)


@dataclass(frozen=True)
class Config:
    """One tiling: ``BN`` weight rows and ``BK`` columns a program step, ``split_k`` programs along
    K, Triton's ``num_stages`` (loads in flight) and ``num_warps``. The default's stages take
    80 KiB of shared memory on sm_90 (Triton cuts the stages where a device has less).
    ``pdl``: launched as a programmatic dependent launch (sm_90 and later): the kernel may start
    while the previous one finishes and waits for it (``griddepcontrol.wait``) before its first
    load, so its launch overlaps the previous kernel's tail; it lets the next kernel start after
    its main loop. ``tail``: the tokens as a tile and a 16-token tail where that covers them
    (:func:`m_tiles`; the module docstring)."""

    BN: int = 64
    BK: int = 128
    split_k: int = 1
    num_stages: int = 4
    num_warps: int = 4
    pdl: bool = False
    tail: bool = False

    def name(self) -> str:
        base = "_".join(f"{tag}{getattr(self, key)}" for key, tag in _NAME_TAGS.items())
        return base + ("_tail" if self.tail else "") + ("_pdl" if self.pdl else "")

    @classmethod
    def from_name(cls, name: str) -> "Config":
        """:meth:`name`'s inverse: ``"bn64_bk128_sk2_st4_w4"`` (``..._tail``, ``..._pdl``, in that
        order) -> Config. ValueError otherwise."""
        pdl = name.endswith("_pdl")
        name_ = name[: -len("_pdl")] if pdl else name
        tail = name_.endswith("_tail")
        parts = (name_[: -len("_tail")] if tail else name_).split("_")
        if len(parts) != len(_NAME_TAGS):
            raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
        values = {}
        for (key, tag), part in zip(_NAME_TAGS.items(), parts):
            if not part.startswith(tag) or not part[len(tag):].isdigit():
                raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
            values[key] = int(part[len(tag):])
        return cls(**values, pdl=pdl, tail=tail)


@triton.jit
def _skinny_kernel(x, w, b, y, ws, pf, M, N, K, K_SPLIT, sx_m, sw_n, sy_m, PF_PROGS,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr,
                   HAS_BIAS: tl.constexpr, SILU_MUL: tl.constexpr, PDL: tl.constexpr, TAIL_M: tl.constexpr,
                   PF_LINES: tl.constexpr, PF_EVICT_LAST: tl.constexpr):
    """Grid (cdiv(N, BN), SPLIT_K). Program (n, s) sums ``K_SPLIT`` columns from ``s * K_SPLIT``
    (a multiple of BK) for weight rows ``n * BN ...``, tokens ``0 .. BM`` and, where ``TAIL_M``,
    ``BM .. BM + TAIL_M`` as a second product with the same weight tile. With ``PF_LINES``, the
    last ``PF_PROGS`` programs (in launch order) each ask the L2 for ``PF_LINES`` 128-byte lines
    of ``pf`` after their main loop: together the first ``PF_PROGS * PF_LINES * 128`` bytes."""
    if PDL:
        gdc_wait()
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rn = pid_n * BN + tl.arange(0, BN)
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    n_ok = rn < N
    m_ok = rm < M
    k0 = pid_k * K_SPLIT
    wp = w + rn.to(tl.int64)[:, None] * sw_n + (k0 + rk)[None, :]
    xp = x + rm[None, :] * sx_m + (k0 + rk)[:, None]
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    if TAIL_M:
        rt = BM + tl.arange(0, TAIL_M)
        t_ok = rt < M
        xq = x + rt[None, :] * sx_m + (k0 + rk)[:, None]
        acc_t = tl.zeros((BN, TAIL_M), dtype=tl.float32)
    for _ in range(0, K_SPLIT, BK):
        wt = tl.load(wp, mask=n_ok[:, None], other=0.0, eviction_policy="evict_first")
        acc = tl.dot(wt, _tokens(xp, m_ok, K, SILU_MUL, wt.dtype), acc)
        if TAIL_M:
            acc_t = tl.dot(wt, _tokens(xq, t_ok, K, SILU_MUL, wt.dtype), acc_t)
            xq += BK
        wp += BK
        xp += BK
    if PDL:
        gdc_launch_dependents()
    if PF_LINES:
        rank = pid_k * tl.num_programs(0) + pid_n - (tl.num_programs(0) * SPLIT_K - PF_PROGS)
        if rank >= 0:
            _l2_prefetch(pf, rank, PF_LINES, PF_EVICT_LAST)
    _finish(acc, rm, m_ok, rn, n_ok, b, y, ws, pid_k, M, N, sy_m, SPLIT_K, HAS_BIAS)
    if TAIL_M:
        _finish(acc_t, rt, t_ok, rn, n_ok, b, y, ws, pid_k, M, N, sy_m, SPLIT_K, HAS_BIAS)


@triton.jit
def _l2_prefetch(pf, block, LINES: tl.constexpr, EVICT_LAST: tl.constexpr):
    """Ask the L2 for 128-byte lines ``block * LINES ...`` of ``pf`` (PTX ``prefetch.global.L2``):
    no data moves to the program, nothing waits for it, and a line already in the L2 costs
    nothing."""
    ptrs = pf.to(tl.pointer_type(tl.int8)) + block.to(tl.int64) * (LINES * 128) + tl.arange(0, LINES) * 128
    if EVICT_LAST:
        tl.inline_asm_elementwise("prefetch.global.L2::evict_last [$1]; // dummy $0", "=r,l", [ptrs],
                                  dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise("prefetch.global.L2 [$1]; // dummy $0", "=r,l", [ptrs],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _prefetch_kernel(pf, PF_LINES: tl.constexpr, EVICT_LAST: tl.constexpr):
    """Grid (programs,): program p asks the L2 for lines ``p * PF_LINES ...`` of ``pf``."""
    _l2_prefetch(pf, tl.program_id(0), PF_LINES, EVICT_LAST)


@triton.jit
def _tokens(xp, ok, K, SILU_MUL: tl.constexpr, dtype: tl.constexpr):
    """The tokens' ``[BK, rows]`` slice at ``xp`` (masked rows 0); with ``SILU_MUL`` silu(gate) *
    up from the gate at ``xp`` and the up ``K`` columns on, formed in fp32, rounded to ``dtype``."""
    xt = tl.load(xp, mask=ok[None, :], other=0.0)
    if SILU_MUL:
        gate = xt.to(tl.float32)
        up = tl.load(xp + K, mask=ok[None, :], other=0.0).to(tl.float32)
        xt = (gate / (1.0 + tl.exp(-gate)) * up).to(dtype)
    return xt


@triton.jit
def _finish(acc, rm, m_ok, rn, n_ok, b, y, ws, pid_k, M, N, sy_m, SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Store ``acc [BN, rows]`` for tokens ``rm``: to ``y`` (with the bias) without split-K, else
    to the workspace's ``pid_k`` slice."""
    if SPLIT_K == 1:
        if HAS_BIAS:
            acc += tl.load(b + rn, mask=n_ok, other=0.0).to(tl.float32)[:, None]
        tl.store(y + rm[None, :] * sy_m + rn[:, None], acc.to(y.dtype.element_ty),
                 mask=n_ok[:, None] & m_ok[None, :])
    else:
        tl.store(ws + (pid_k * M + rm[None, :]).to(tl.int64) * N + rn[:, None], acc,
                 mask=n_ok[:, None] & m_ok[None, :])


@triton.jit
def _split_sum_kernel(ws, b, y, M, N, sy_m, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr,
                      PDL: tl.constexpr):
    """Grid (M, cdiv(N, BLOCK)): ``y[m, n] = sum_s ws[s, m, n] (+ b[n])`` with s in order."""
    if PDL:
        gdc_wait()
    m = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = rn < N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws + (s * M + m).to(tl.int64) * N + rn, mask=ok, other=0.0)
    if HAS_BIAS:
        acc += tl.load(b + rn, mask=ok, other=0.0).to(tl.float32)
    tl.store(y + m * sy_m + rn, acc.to(y.dtype.element_ty), mask=ok)


def _check(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], cfg: Optional[Config],
           act: Optional[str]) -> None:
    """The module docstring's contract; the tiling's K divisibility too where ``cfg`` is given."""
    if act not in ACTS:
        raise ValueError(f"skinny_linear: act {act!r} is not one of {ACTS}")
    width = 2 * weight.shape[-1] if act == SILU_MUL else weight.shape[-1]
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != width:
        raise ValueError(f"skinny_linear: x [M, {'2K' if act else 'K'}] and weight [N, K] expected, got "
                         f"{tuple(x.shape)}, {tuple(weight.shape)}")
    if not 1 <= x.shape[0] <= MAX_M:
        raise ValueError(f"skinny_linear: M = {x.shape[0]} outside 1..{MAX_M}")
    if x.dtype != weight.dtype or x.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"skinny_linear: x and weight must share bf16 or fp16, got {x.dtype}, {weight.dtype}")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError("skinny_linear: the last dim of x and weight must be contiguous")
    if bias is not None and (tuple(bias.shape) != (weight.shape[0],) or not bias.is_contiguous()):
        raise ValueError(f"skinny_linear: bias [N] contiguous expected, got {tuple(bias.shape)}")
    K = weight.shape[1]
    if cfg is not None and K % (cfg.BK * cfg.split_k) != 0:
        raise ValueError(f"skinny_linear: K = {K} is not a multiple of BK x split_k = {cfg.BK * cfg.split_k} "
                         f"({cfg.name()})")


def block_m(M: int) -> int:
    """The tokens' tile: M padded to 16, 32, 64 or 128."""
    return 16 if M <= 16 else 32 if M <= 32 else 64 if M <= 64 else 128


def m_tiles(M: int, tail: bool = False) -> tuple:
    """``(BM, TAIL_M)``: the tokens' tile and the tail tile's tokens (0: none). With ``tail`` and
    ``M`` at most 16 past a 16 / 32 / 64-token tile, that tile and a :data:`TAIL`-token tail;
    else :func:`block_m` alone."""
    if tail:
        for bm in (16, 32, 64):
            if bm < M <= bm + TAIL:
                return bm, TAIL
    return block_m(M), 0


def _prefetch_plan(t: Optional[torch.Tensor], nbytes: int, lines: Optional[int], programs: int) -> tuple:
    """``(asking, lines)``: how many of a grid's ``programs`` programs ask the L2 for ``lines``
    lines each (None: :func:`prefetch_lines_for`) to cover ``nbytes`` of ``t`` (within ``t``);
    ``(0, 0)`` where there is nothing to prefetch or no GPU to ask."""
    if t is None or nbytes <= 0 or not t.is_cuda or not t.is_contiguous():
        return 0, 0
    lines = lines or prefetch_lines_for(nbytes, programs, t.device)
    return max(0, min(programs, min(nbytes, t.numel() * t.element_size()) // (lines * 128))), lines


def prefetch_lines_for(nbytes: int, programs: int, device) -> int:
    """128-byte lines a program asks for to prefetch ``nbytes`` from a grid of ``programs``
    programs on ``device``: the bytes spread over its last wave (at most one program per
    multiprocessor), a power of two in 256..8192."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    per = max(1, -(-nbytes // (128 * max(1, min(programs, sms)))))
    return min(8192, max(256, 1 << (per - 1).bit_length()))


def prefetch_l2(t: torch.Tensor, nbytes: int, lines: Optional[int] = None, evict_last: bool = False) -> None:
    """Ask the L2 for the first ``nbytes`` of contiguous ``t`` (rounded down to ``lines * 128``
    bytes a program; None: :func:`prefetch_lines_for` a grid of one program per multiprocessor)
    in a kernel of its own; nothing where ``t`` is not a CUDA tensor."""
    progs, lines = _prefetch_plan(t, nbytes, lines, 1 << 20)
    if progs:
        _prefetch_kernel[(progs,)](t, PF_LINES=lines, EVICT_LAST=evict_last, num_warps=4)


def skinny_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  cfg: Config = Config(), out: Optional[torch.Tensor] = None,
                  workspace: Optional[torch.Tensor] = None, act: Optional[str] = None,
                  prefetch: Optional[torch.Tensor] = None, prefetch_bytes: int = 0,
                  prefetch_lines: Optional[int] = None, prefetch_evict_last: bool = False) -> torch.Tensor:
    """``x @ weight.T (+ bias)`` -> [M, N] (module docstring). ``workspace``: fp32 with at least
    ``split_k * M * N`` elements when ``cfg.split_k > 1`` (allocated here when None).
    ``prefetch``: a contiguous tensor the next kernels will read (the next product's weight): the
    product's last programs ask the L2 for its first ``prefetch_bytes`` after their main loop, in
    ``prefetch_lines`` 128-byte lines a program (a power of two; None: :func:`prefetch_lines_for`
    this product's grid), so those bytes load while the
    kernels between the two products run. A hint: results do not depend on it. The server does
    not use it (``benchmark/ddtree/bench_l2_prefetch.py`` measures it; RESULTS section 3)."""
    _check(x, weight, bias, cfg, act)
    M, K = x.shape[0], weight.shape[1]
    N = weight.shape[0]
    y = out if out is not None else torch.empty((M, N), dtype=x.dtype, device=x.device)
    b = bias if bias is not None else y
    if cfg.split_k > 1:
        need = cfg.split_k * M * N
        ws = workspace if workspace is not None and workspace.numel() >= need else \
            torch.empty(need, dtype=torch.float32, device=x.device)
    else:
        ws = y
    grid = (triton.cdiv(N, cfg.BN), cfg.split_k)
    bm, tail = m_tiles(M, cfg.tail)
    pf_progs, pf_lines = _prefetch_plan(prefetch, prefetch_bytes, prefetch_lines, grid[0] * grid[1])
    _skinny_kernel[grid](x, weight, b, y, ws, prefetch if pf_progs else weight, M, N, K, K // cfg.split_k,
                         x.stride(0), weight.stride(0), y.stride(0), pf_progs, BM=bm, BN=cfg.BN, BK=cfg.BK,
                         SPLIT_K=cfg.split_k, HAS_BIAS=bias is not None and cfg.split_k == 1,
                         SILU_MUL=act == SILU_MUL, PDL=cfg.pdl, TAIL_M=tail,
                         PF_LINES=pf_lines if pf_progs else 0, PF_EVICT_LAST=prefetch_evict_last,
                         num_stages=cfg.num_stages, num_warps=cfg.num_warps,
                         **({"launch_pdl": True} if cfg.pdl else {}))
    if cfg.split_k > 1:
        _split_sum_kernel[(M, triton.cdiv(N, 1024))](ws, b, y, M, N, y.stride(0), SPLIT_K=cfg.split_k,
                                                     BLOCK=1024, HAS_BIAS=bias is not None, PDL=cfg.pdl, num_warps=4,
                                                     **({"launch_pdl": True} if cfg.pdl else {}))
    return y


def silu_mul_reference(x: torch.Tensor) -> torch.Tensor:
    """``[M, 2K] -> [M, K]``: ``silu(gate) * up`` in fp32, rounded to x's dtype."""
    gate, up = x.float().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


def skinny_linear_reference(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                            act: Optional[str] = None) -> torch.Tensor:
    """Plain torch: fp32 accumulation, cast to x's dtype."""
    if act is not None:
        _check(x, weight, bias, None, act)
        x = silu_mul_reference(x)
    y = x.float() @ weight.float().T
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
