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
result does not depend on scheduling).

``Config.streamk = P`` runs the product as a stream-K grid instead: ``P`` programs per
multiprocessor share the ``tiles x (K / BK)`` weight blocks in equal contiguous runs, so no wave of
tiles runs part-empty at the end of the product. A tile whose K range two or more programs share
is finished in the same launch: each writes its fp32 partial sum to the workspace, takes a ticket
from the tile's counter, and the program holding the last ticket adds the partials in program
order (the same bits whichever program finishes last) and resets the counter to 0. The counters
are int32 zeros kept per weight (:func:`streamk_counters`) and are zero again after every launch,
so the kernel replays in a CUDA graph without a memset.

``Config`` holds one choice of tiles; ``skinny_linear`` takes one explicitly (the benchmark sweeps
them per shape). Raises ValueError for inputs outside this contract.
"""

from __future__ import annotations

import functools
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


@dataclass(frozen=True)
class Config:
    """One tiling: ``BN`` weight rows and ``BK`` columns a program step, ``split_k`` programs along
    K, Triton's ``num_stages`` (loads in flight) and ``num_warps``. The default's stages take
    80 KiB of shared memory on sm_90 (Triton cuts the stages where a device has less).
    ``pdl``: launched as a programmatic dependent launch (sm_90 and later): the kernel may start
    while the previous one finishes and waits for it (``griddepcontrol.wait``) before its first
    load, so its launch overlaps the previous kernel's tail; it lets the next kernel start after
    its main loop. ``streamk``: 0, or programs per multiprocessor of a stream-K grid (module
    docstring; with ``split_k`` 1)."""

    BN: int = 64
    BK: int = 128
    split_k: int = 1
    num_stages: int = 4
    num_warps: int = 4
    pdl: bool = False
    streamk: int = 0

    def __post_init__(self):
        if self.streamk < 0 or (self.streamk and self.split_k != 1):
            raise ValueError(f"skinny_gemm Config: streamk {self.streamk} needs split_k 1 (got {self.split_k})")

    def name(self) -> str:
        base = "_".join(f"{tag}{getattr(self, key)}" for key, tag in _NAME_TAGS.items())
        if self.streamk:
            base += f"_sp{self.streamk}"
        return base + "_pdl" if self.pdl else base

    @classmethod
    def from_name(cls, name: str) -> "Config":
        """:meth:`name`'s inverse: ``"bn64_bk128_sk2_st4_w4"`` (``..._sp<P>`` a stream-K grid,
        ``..._pdl``) -> Config. ValueError otherwise."""
        pdl = name.endswith("_pdl")
        parts = (name[: -len("_pdl")] if pdl else name).split("_")
        streamk = 0
        if len(parts) == len(_NAME_TAGS) + 1 and parts[-1].startswith("sp") and parts[-1][2:].isdigit():
            streamk = int(parts.pop()[2:])
            if streamk == 0:
                raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
        if len(parts) != len(_NAME_TAGS):
            raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
        values = {}
        for (key, tag), part in zip(_NAME_TAGS.items(), parts):
            if not part.startswith(tag) or not part[len(tag):].isdigit():
                raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
            values[key] = int(part[len(tag):])
        if streamk and values["split_k"] != 1:
            raise ValueError(f"not a skinny_gemm tiling name: {name!r}")
        return cls(**values, pdl=pdl, streamk=streamk)


@triton.jit
def _dot_blocks(wp, xp, n_ok, m_ok, K, k_lo, k_hi, BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr,
                SILU_MUL: tl.constexpr):
    """``[BN, BM]`` fp32: ``(k_hi - k_lo) / BK`` blocks of BK columns, from the pointers on, of the
    weight tile at ``wp`` (``[BN, BK]`` pointers) times the tokens' slice at ``xp`` (``[BK, BM]``);
    with ``SILU_MUL`` the tokens' slice is ``silu(gate) * up``, ``up`` K columns after ``gate``,
    rounded to the weight's dtype."""
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for _ in range(k_lo, k_hi, BK):
        wt = tl.load(wp, mask=n_ok[:, None], other=0.0, eviction_policy="evict_first")
        xt = tl.load(xp, mask=m_ok[None, :], other=0.0)
        if SILU_MUL:
            gate = xt.to(tl.float32)
            up = tl.load(xp + K, mask=m_ok[None, :], other=0.0).to(tl.float32)
            xt = (gate / (1.0 + tl.exp(-gate)) * up).to(wt.dtype)
        acc = tl.dot(wt, xt, acc)
        wp += BK
        xp += BK
    return acc


@triton.jit
def _skinny_kernel(x, w, b, y, ws, M, N, K, K_SPLIT, sx_m, sw_n, sy_m,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr,
                   HAS_BIAS: tl.constexpr, SILU_MUL: tl.constexpr, PDL: tl.constexpr):
    """Grid (cdiv(N, BN), SPLIT_K). Program (n, s) sums ``K_SPLIT`` columns from ``s * K_SPLIT``
    (a multiple of BK) for weight rows ``n * BN ...``."""
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
    acc = _dot_blocks(wp, xp, n_ok, m_ok, K, 0, K_SPLIT, BN, BM, BK, SILU_MUL)
    if PDL:
        gdc_launch_dependents()
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


@triton.jit
def _skinny_streamk_kernel(x, w, b, y, ws, cnt, M, N, K, sx_m, sw_n, sy_m, K_ITERS, UNITS,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr,
                           SILU_MUL: tl.constexpr, PDL: tl.constexpr):
    """Grid (P,): program p sums weight blocks ``[p * UNITS, (p + 1) * UNITS)`` of the
    ``cdiv(N, BN) * K_ITERS`` blocks, tile by tile (block u: rows ``(u // K_ITERS) * BN ...``,
    columns ``(u % K_ITERS) * BK ...``). A tile it covers whole is stored; a tile it shares goes to
    ``ws`` slot ``2 p`` (its first tile) or ``2 p + 1`` (its last), ``[M, BN]`` fp32 each, and
    ``cnt[tile]`` hands out tickets: the last adds the slots of programs ``first .. last`` in
    order, stores the tile and sets the counter back to 0."""
    if PDL:
        gdc_wait()
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(N, BN)
    start = pid * UNITS
    end = tl.minimum(start + UNITS, n_tiles * K_ITERS)
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    rb = tl.arange(0, BN)
    m_ok = rm < M
    t_first = start // K_ITERS
    for t in range(t_first, (end - 1) // K_ITERS + 1):
        kb = tl.maximum(start - t * K_ITERS, 0)
        ke = tl.minimum(end - t * K_ITERS, K_ITERS)
        rn = t * BN + rb
        n_ok = rn < N
        wp = w + rn.to(tl.int64)[:, None] * sw_n + (kb * BK + rk)[None, :]
        xp = x + rm[None, :] * sx_m + (kb * BK + rk)[:, None]
        acc = _dot_blocks(wp, xp, n_ok, m_ok, K, kb * BK, ke * BK, BN, BM, BK, SILU_MUL)
        out_mask = n_ok[:, None] & m_ok[None, :]
        if (kb == 0) & (ke == K_ITERS):
            if HAS_BIAS:
                acc += tl.load(b + rn, mask=n_ok, other=0.0).to(tl.float32)[:, None]
            tl.store(y + rm[None, :] * sy_m + rn[:, None], acc.to(y.dtype.element_ty), mask=out_mask)
        else:
            slot = 2 * pid + (t != t_first).to(tl.int32)
            tile_ws = rm[None, :] * BN + rb[:, None]
            tl.store(ws + slot.to(tl.int64) * M * BN + tile_ws, acc, mask=out_mask)
            tl.debug_barrier()  # every thread's partial is written before the ticket is taken
            first = (t * K_ITERS) // UNITS
            last = ((t + 1) * K_ITERS - 1) // UNITS
            ticket = tl.atomic_add(cnt + t, 1, sem="acq_rel")
            tl.debug_barrier()
            if ticket == last - first:
                total = tl.zeros((BN, BM), dtype=tl.float32)
                for q in range(first, last + 1):
                    q_slot = 2 * q + ((q * UNITS) // K_ITERS != t).to(tl.int32)
                    total += tl.load(ws + q_slot.to(tl.int64) * M * BN + tile_ws, mask=out_mask, other=0.0,
                                     cache_modifier=".cg")
                if HAS_BIAS:
                    total += tl.load(b + rn, mask=n_ok, other=0.0).to(tl.float32)[:, None]
                tl.store(y + rm[None, :] * sy_m + rn[:, None], total.to(y.dtype.element_ty), mask=out_mask)
                tl.atomic_xchg(cnt + t, 0, sem="relaxed")
    if PDL:
        gdc_launch_dependents()


def streamk_grid(N: int, K: int, cfg: "Config", sms: int):
    """``(programs, UNITS, K_ITERS)`` of ``cfg``'s stream-K grid for a ``[N, K]`` weight on a GPU
    of ``sms`` multiprocessors (module docstring)."""
    k_iters = K // cfg.BK
    blocks = triton.cdiv(N, cfg.BN) * k_iters
    if blocks < 1:
        raise ValueError(f"skinny_linear: a stream-K grid needs N >= 1 and K >= BK, got N = {N}, K = {K} ({cfg.name()})")
    units = triton.cdiv(blocks, max(1, min(blocks, cfg.streamk * sms)))
    return triton.cdiv(blocks, units), units, k_iters


_COUNTERS: dict = {}


def streamk_counters(weight: torch.Tensor, BN: int) -> torch.Tensor:
    """The int32 tile counters of stream-K products with ``weight`` at ``BN``-row tiles, zeros,
    one buffer per (weight, BN) kept for the process (the kernel leaves them zero). One first asked
    for inside a CUDA graph capture belongs to that graph alone (its zero fill is a node of the
    graph) and is not kept.
    Two stream-K products with the same weight must not run at the same time (on two streams):
    they would share the counters."""
    key = (weight.device, weight.data_ptr(), tuple(weight.shape), BN)
    c = _COUNTERS.get(key)
    if c is None:
        c = torch.zeros(triton.cdiv(weight.shape[0], BN), dtype=torch.int32, device=weight.device)
        if not (weight.is_cuda and torch.cuda.is_current_stream_capturing()):
            _COUNTERS[key] = c  # (one made in a capture is zeroed only when its graph replays: not shared)
    return c


@functools.lru_cache(maxsize=None)
def multiprocessors(device: torch.device) -> int:
    """The multiprocessors a stream-K grid spreads over on ``device``; 4 off CUDA (the
    interpreter: a few programs, so that tiles are shared)."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def workspace_size(cfg: Config, M: int, N: int, K: int, sms: int) -> int:
    """fp32 elements of ``cfg``'s workspace for ``M`` tokens and an ``[N, K]`` weight on ``sms``
    multiprocessors: ``split_k * M * N`` for split-K, ``2 * programs * M * BN`` for a stream-K
    grid (:func:`streamk_grid`), 0 otherwise."""
    if cfg.streamk:
        return 2 * streamk_grid(N, K, cfg, sms)[0] * M * cfg.BN
    return cfg.split_k * M * N if cfg.split_k > 1 else 0


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


def skinny_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  cfg: Config = Config(), out: Optional[torch.Tensor] = None,
                  workspace: Optional[torch.Tensor] = None, act: Optional[str] = None) -> torch.Tensor:
    """``x @ weight.T (+ bias)`` -> [M, N] (module docstring). ``workspace``: fp32 with at least
    :func:`workspace_size` elements where that is not 0 (allocated here when None or smaller)."""
    _check(x, weight, bias, cfg, act)
    M, K = x.shape[0], weight.shape[1]
    N = weight.shape[0]
    y = out if out is not None else torch.empty((M, N), dtype=x.dtype, device=x.device)
    b = bias if bias is not None else y
    sms = multiprocessors(x.device) if cfg.streamk else 0
    need = workspace_size(cfg, M, N, K, sms)
    if not need:
        ws = y  # (not read)
    elif workspace is not None and workspace.numel() >= need:
        ws = workspace
    else:
        ws = torch.empty(need, dtype=torch.float32, device=x.device)
    if cfg.streamk:
        programs, units, k_iters = streamk_grid(N, K, cfg, sms)
        _skinny_streamk_kernel[(programs,)](x, weight, b, y, ws, streamk_counters(weight, cfg.BN), M, N, K,
                                            x.stride(0), weight.stride(0), y.stride(0), k_iters, units,
                                            BM=block_m(M), BN=cfg.BN, BK=cfg.BK, HAS_BIAS=bias is not None,
                                            SILU_MUL=act == SILU_MUL, PDL=cfg.pdl, num_stages=cfg.num_stages,
                                            num_warps=cfg.num_warps, **({"launch_pdl": True} if cfg.pdl else {}))
        return y
    grid = (triton.cdiv(N, cfg.BN), cfg.split_k)
    _skinny_kernel[grid](x, weight, b, y, ws, M, N, K, K // cfg.split_k, x.stride(0), weight.stride(0),
                         y.stride(0), BM=block_m(M), BN=cfg.BN, BK=cfg.BK, SPLIT_K=cfg.split_k,
                         HAS_BIAS=bias is not None and cfg.split_k == 1, SILU_MUL=act == SILU_MUL,
                         PDL=cfg.pdl, num_stages=cfg.num_stages, num_warps=cfg.num_warps,
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
