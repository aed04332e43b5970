"""``--speculative-ddtree-gdn-mode wy``: snapshot-free tree verify for GatedDeltaNet layers.

In TARGET_VERIFY of a DDTREE step, each GatedDeltaNet layer runs our kernels instead of
sglang's per-node ones:

- ``tree_conv`` over each node's ancestor window (reads the request's conv state, writes
  nothing to the pool: sglang's kernel rolls the state in place, ours leaves it as committed);
- ``tree_gdn_verify`` (tree WY solve, ``kernels/gdn_tree_triton.py``) from the request's
  recurrent state (read-only);
- and keeps what the commit needs in buffers stacked over the pool's layers: ``u`` and ``G``
  (fp32) and the pre-conv inputs (the commit recomputes the path's keys from them, so the keys
  are not kept: 48 x 65 x 4 KiB = 12 MiB less per request at budget 64).

After acceptance the worker calls :func:`wy_commit`, which rebuilds each layer's state of the
last accepted node from at most L + 1 path terms and writes it, and the conv window of the
path, into the request's slots in place — one launch for the states of every layer and one for
the conv windows (per-layer launches cost ~4 x 48 host launches a step). No per-node state
snapshot is stored or copied.

sglang has no seam for a per-algorithm linear-attention verify, so this is a narrow AROUND hook
on ``HybridLinearAttnBackend.forward_extend`` (the dispatcher in front of the GDN backend; its
module imports on every platform) that only acts on linear-attention layers of a forward batch
carrying a :class:`WyVerifyState` (a DDTREE verify in wy mode); every other call goes to sglang.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch

logger = logging.getLogger(__name__)

# Developer cross-check: every wy tree verify also runs sglang's per-node verify on the same
# inputs (pool scratch kept at full size, conv state restored after it) and logs the largest
# output difference per step; the served output stays ours.
CHECK_ENV = "SGLANG_DDTREE_WY_CHECK"


# Developer knob: Triton input precision of the tree verify's products ("bf16x3" default,
# "tf32x3", or "ieee" for plain fp32 FMA), to separate rounding from logic in the cross-check.
PRECISION_ENV = "SGLANG_DDTREE_WY_PRECISION"


# Developer knob: how the recurrent state commit runs: "cuda" (sgl-kernel's CUDA commit, every
# layer of a run in one launch; the default where the extension loads: H200, session 12, as fast
# as the Triton kernel with the root alone accepted and 10-25% faster on longer paths), "fused"
# (the Triton kernel, the same launches; the default where the CUDA build is absent) or
# "per-layer" (one Triton launch per layer, the fused commit's A/B). "cuda" asked for where the
# extension cannot load is an error.
COMMIT_ENV = "SGLANG_DDTREE_WY_COMMIT"
COMMIT_MODES = ("fused", "per-layer", "cuda")

# Developer knob: the tree verify's implementation (kernels/gdn_tree_triton.py ``impl``:
# "auto" default, "fused", "split", "twostage"), to time them inside the engine.
IMPL_ENV = "SGLANG_DDTREE_WY_IMPL"

# Developer knob: "1" / "0" forces the twostage verify to form its pair products inside its
# prep kernel or not (``tree_gdn_verify(pairs_in_prep=...)``); unset: the kernel's rule
# (``prep_forms_pairs``: trees past 33 nodes, where the H200 timed it faster).
PAIRS_ENV = "SGLANG_DDTREE_WY_PAIRS_IN_PREP"
# Developer knob: "1" / "0" forces the twostage apply pass to launch as a programmatic dependent
# of its prep or not (``tree_gdn_verify(pdl=...)``: its state products overlap the prep); unset:
# the kernel's rule (``apply_as_dependent``: apply grids of at most three programs per SM).
PDL_ENV = "SGLANG_DDTREE_WY_PDL"
# Developer knob: "1" / "0" forces the tree conv's token tiles over the flattened batch or per
# tree (``tree_conv(flat=...)``); unset: flat for more than one tree.
CONV_FLAT_ENV = "SGLANG_DDTREE_WY_CONV_FLAT"
# Developer knobs: the precision of the verify's fp32-by-fp32 products (``tree_gdn_verify(
# solve_precision=...)``: "tf32x3" / "bf16x3" / "ieee") and the bf16 parts the state is split in
# for the state products (``state_parts``: "3" / "2"); unset: the kernel's defaults (under
# "bf16x3" with bf16 q/k: "bf16x3" and 2).
SOLVE_PRECISION_ENV = "SGLANG_DDTREE_WY_SOLVE_PRECISION"
STATE_PARTS_ENV = "SGLANG_DDTREE_WY_STATE_PARTS"


def _env_flag(name: str) -> Optional[bool]:
    """A developer knob that forces an option on ("1") or off ("0"); unset: the kernel decides."""
    val = os.environ.get(name)
    if val is None or val == "":
        return None
    if val not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1 (unset: automatic), got {val!r}")
    return val == "1"


@functools.lru_cache(maxsize=1)
def _cuda_commit_unavailable() -> Optional[str]:
    """Why sgl-kernel's CUDA commit cannot run in this process (None: it can); asked once (a
    failed JIT build is not retried every step) and logged once when the Triton commit serves."""
    from ..kernels import tree_cuda

    why = tree_cuda.available()
    if why is not None and torch.cuda.is_available():
        logger.warning("DDTREE wy: CUDA commit kernel unavailable (%s); committing through Triton.", why)
    return why


def _kernel_options() -> Dict[str, Any]:
    """The developer knobs above as the verify kernels' keywords, read once per verify state
    (per step, or per captured batch size) rather than in every layer's call."""
    commit = os.environ.get(COMMIT_ENV) or None
    if commit is not None and commit not in COMMIT_MODES:
        raise ValueError(f"{COMMIT_ENV} must be one of {COMMIT_MODES} (unset: cuda where the CUDA "
                         f"extension loads, else fused), got {commit!r}")
    why = _cuda_commit_unavailable() if commit in (None, "cuda") else None
    if commit == "cuda" and why is not None:
        raise RuntimeError(f"{COMMIT_ENV}=cuda: the CUDA tree kernels cannot be used here ({why}); "
                           f"unset {COMMIT_ENV} for the Triton commit")
    if commit is None:
        commit = "fused" if why is not None else "cuda"
    from ..kernels.gdn_tree import SOLVE_PRECISIONS, VerifyOptions

    solve = os.environ.get(SOLVE_PRECISION_ENV) or None
    if solve is not None and solve not in SOLVE_PRECISIONS:
        raise ValueError(f"{SOLVE_PRECISION_ENV} must be one of {SOLVE_PRECISIONS} (unset: the kernel's default), "
                         f"got {solve!r}")
    parts = os.environ.get(STATE_PARTS_ENV) or None
    if parts is not None and parts not in ("2", "3"):
        raise ValueError(f"{STATE_PARTS_ENV} must be 2 or 3 (unset: the kernel's default), got {parts!r}")
    opts = dict(commit=commit, precision=os.environ.get(PRECISION_ENV, "bf16x3"), impl=os.environ.get(IMPL_ENV, "auto"),
                pairs_in_prep=_env_flag(PAIRS_ENV), pdl=_env_flag(PDL_ENV), flat_conv=_env_flag(CONV_FLAT_ENV),
                solve_precision=solve, state_parts=None if parts is None else int(parts))
    opts["verify"] = VerifyOptions(**{k: opts[k] for k in ("impl", "precision", "solve_precision", "state_parts",
                                                           "pairs_in_prep", "pdl")})
    return opts


def wy_check_enabled() -> bool:
    return os.environ.get(CHECK_ENV) == "1"

_TARGET = "sglang.srt.layers.attention.hybrid_linear_attn_backend.HybridLinearAttnBackend.forward_extend"


@dataclass
class WyVerifyState:
    """Per-step tree description for the linear layers, carried on the verify input.

    parent ``[bs, N]`` int32 (-1: root or padding); anc ``[bs, N, N]`` uint8 ancestor mask
    (self included); ``saved[l]`` = (layer, layer cache, slots) of pool layer ``l`` until the
    commit, whose inputs are in ``work``.
    """

    parent: torch.Tensor
    anc: torch.Tensor
    saved: Dict[int, Tuple] = field(default_factory=dict)
    # (layer id, max |ours - sglang's|, max |sglang's|) per layer, under the cross-check.
    check: List[Tuple[int, float, float]] = field(default_factory=list)
    # Under the cross-check: sglang's per-node scratch row of each request (its verify wrote
    # every node's state there), to compare our committed state with the accepted node's.
    check_rows: Optional[torch.Tensor] = None
    # The commit's inputs for ``work_rows`` trees, stacked over the pool's layers (made on first
    # use): x [L, R*N, C], u [L, R, N, HV, V], G [L, R, N, HV]. A CUDA-graph
    # verify shares one dict between the graphs of every batch size: what the commit reads
    # outlives the captured forward, and per-size copies ran the 27B capture of batch sizes
    # 1..64 out of memory (~2.4 GB per size).
    work: Dict[str, torch.Tensor] = field(default_factory=dict)
    work_rows: int = 0
    # Flat storage behind ``work`` shared by the graphs of every verify width (budget auto builds
    # one graph runner per width, compat/verify_widths.py): one width's verify and commit run at
    # a time, so the widths need the largest one's buffers, not the sum (None: ``work`` owns its
    # tensors). name -> 1-D tensor; a width needing more replaces the entry with a larger one.
    work_storage: Optional[Dict[str, torch.Tensor]] = None
    # Verify positions (requests x width) the storage is made for at least: the most any width's
    # graphs use (budget auto sets it before the captures, compat/verify_widths.py), so that the
    # first width captured does not size it for fewer and a later one replace it.
    work_storage_tokens: int = 0
    # Conv weight / bias address tables per run of layers (``_weight_tables``), shared like work.
    tables: Dict[str, Tuple] = field(default_factory=dict)
    # sglang's pool state stacked over layers (``temporal [L, slots, HV, V, K]``, ``conv[0]
    # [L, slots, C, W-1]``), set by the verify for the commit.
    pool_states: Any = None
    # No root-to-node path has more non-root nodes than this (--speculative-ddtree-max-depth,
    # the tree builder's limit): fewer squarings in the verify's solve. None: no bound.
    max_depth: Optional[int] = None
    # The verify kernels' developer knobs (``_kernel_options``).
    options: Dict[str, Any] = field(default_factory=_kernel_options)

    @classmethod
    def from_layout(cls, layout, tables: Optional[Dict[str, Tuple]] = None,
                    max_depth: Optional[int] = None) -> "WyVerifyState":
        """The step's state; ``tables``: the caller's weight-table cache, kept across steps (the
        layers' parameters do not move; rebuilding them is a host-to-device copy, a host sync)."""
        parent = layout.parent.to(torch.int32).contiguous()
        return cls(parent=parent, anc=layout.ancestor_mask.to(torch.uint8).contiguous(), work_rows=parent.shape[0],
                   tables=tables if tables is not None else {}, max_depth=max_depth)


def wy_target_verify(backend, layer, mixed_qkv: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                     wy: WyVerifyState) -> torch.Tensor:
    """One GatedDeltaNet layer's tree verify. ``mixed_qkv [T, C]`` pre-conv projections (q | k | v),
    ``a, b [T, HV]``. Returns the core attention output ``[T, HV, V]`` (what sglang's
    ``forward_extend`` returns, up to a leading unit dimension the caller reshapes away)."""
    from ..kernels.gdn_tree import tree_conv, tree_gdn_verify

    if layer.activation not in ("silu", "swish"):
        raise NotImplementedError(
            f"--speculative-ddtree-gdn-mode wy: conv activation {layer.activation!r} is not supported; "
            "use --speculative-ddtree-gdn-mode snapshot."
        )
    pool = backend.req_to_token_pool
    cache = pool.mamba2_layer_cache(layer.layer_id)
    conv_pool, ssm_pool = cache.conv[0], cache.temporal
    hv, v_dim, k_dim = layer.num_v_heads, layer.head_v_dim, layer.head_k_dim
    if ssm_pool.stride(0) != hv * v_dim * k_dim or not ssm_pool[0].is_contiguous():
        raise NotImplementedError(
            "--speculative-ddtree-gdn-mode wy needs a contiguous per-slot recurrent state pool "
            f"(got strides {tuple(ssm_pool.stride())}); use --speculative-ddtree-gdn-mode snapshot."
        )
    wy.pool_states = pool.get_speculative_mamba2_params_all_layers()
    li, n_layers = _pool_layer(wy.pool_states.temporal, ssm_pool)
    slots = backend.forward_metadata.mamba_cache_indices[: wy.parent.shape[0]]
    x, u_out, G_out = _work_views(wy, li, n_layers, mixed_qkv, hv, v_dim)
    opts = wy.options
    y = tree_conv(x, layer.conv_weights, layer.bias, conv_pool, slots, wy.parent, activation=True,
                  flat=opts["flat_conv"])
    T = y.shape[0]
    q, k, v = torch.split(y, [layer.q_dim, layer.k_dim, layer.v_dim], dim=-1)
    q = q.reshape(T, layer.num_q_heads, layer.head_q_dim)
    k = k.reshape(T, layer.num_k_heads, k_dim)
    v = v.reshape(T, hv, v_dim)
    o, u, G = tree_gdn_verify(q, k, v, a, b, layer.A_log, layer.dt_bias, wy.anc, ssm_pool, slots,
                              u_out=u_out, G_out=G_out, max_depth=wy.max_depth, options=opts["verify"])
    wy.saved[li] = (layer, cache, slots)
    return o


def _pool_layer(stacked: torch.Tensor, ssm_pool: torch.Tensor) -> Tuple[int, int]:
    """``(index of this layer's state in the pool's stacked tensor, number of pool layers)``,
    from where the layer's view starts in sglang's ``[L, slots, HV, V, K]`` state tensor."""
    step = stacked.stride(0) * stacked.element_size()
    li, rem = divmod(ssm_pool.data_ptr() - stacked.data_ptr(), step)
    if rem or not 0 <= li < stacked.shape[0] or stacked[li].data_ptr() != ssm_pool.data_ptr():
        raise NotImplementedError("--speculative-ddtree-gdn-mode wy: a layer's state is not a layer of the "
                                  "pool's stacked state tensor; use --speculative-ddtree-gdn-mode snapshot.")
    return int(li), int(stacked.shape[0])


def _carve(storage: Optional[Dict[str, torch.Tensor]], name: str, shape: Tuple[int, ...], dtype: torch.dtype,
           device, min_numel: int = 0) -> torch.Tensor:
    """A tensor of ``shape`` at the start of ``storage[name]`` (grown, i.e. replaced, when too small
    or of another dtype; tensors carved before keep the old storage alive; a new one holds at
    least ``min_numel`` elements), or a tensor of its own without a storage."""
    numel = 1
    for d in shape:
        numel *= int(d)
    if storage is None:
        return torch.empty(shape, dtype=dtype, device=device)
    flat = storage.get(name)
    if flat is None or flat.numel() < numel or flat.dtype != dtype or flat.device != torch.device(device):
        flat = storage[name] = torch.empty(max(numel, int(min_numel)), dtype=dtype, device=device)
    return flat[:numel].view(shape)


def _work_views(wy: WyVerifyState, li: int, n_layers: int, mixed_qkv: torch.Tensor, hv: int, v_dim: int):
    """Pool layer ``li``'s commit buffers cut to the step's ``bs`` trees (made on first use for
    ``wy.work_rows`` trees and ``n_layers`` layers): ``x [bs*N, C]`` holding a copy of
    ``mixed_qkv``, ``u [bs, N, HV, V]``, ``G [bs, N, HV]``."""
    bs, n = wy.parent.shape
    if bs > wy.work_rows:
        raise RuntimeError(f"DDTREE wy: {bs} trees in a verify whose buffers hold {wy.work_rows}")
    w = wy.work
    if not w:
        dev, rows = mixed_qkv.device, wy.work_rows
        # Every buffer is per verify position: a storage made now holds the reserved positions.
        per = max(int(wy.work_storage_tokens), rows * n)
        w["x"] = _carve(wy.work_storage, "x", (n_layers, rows * n, mixed_qkv.shape[1]), mixed_qkv.dtype, dev,
                        n_layers * per * mixed_qkv.shape[1])
        w["u"] = _carve(wy.work_storage, "u", (n_layers, rows, n, hv, v_dim), torch.float32, dev,
                        n_layers * per * hv * v_dim)
        w["G"] = _carve(wy.work_storage, "G", (n_layers, rows, n, hv), torch.float32, dev, n_layers * per * hv)
    x = w["x"][li, : bs * n]
    x.copy_(mixed_qkv)
    return x, w["u"][li, :bs], w["G"][li, :bs]


def wy_commit(wy: WyVerifyState, accepted: torch.Tensor, accept_len: torch.Tensor,
              track_slots: Optional[torch.Tensor] = None, track_at: Optional[torch.Tensor] = None) -> None:
    """Write every verified layer's state of the last accepted node (recurrent state and conv
    window) into the requests' slots. ``accepted [bs, P]`` verify positions of the path, root
    first, -1 padded; ``accept_len [bs]`` accepted drafts.

    Prefix-cache state tracking (sglang's mamba extra buffer): ``track_slots [bs]`` the requests'
    tracking slots and ``track_at [bs]`` the path index whose state the radix cache keeps (-1:
    none this step); that state is written into the tracking slot first, from the same committed
    state the main commit then advances."""
    from ..kernels.gdn_tree import tree_conv_commit_layers, tree_gdn_commit_from_x_layers

    if not wy.saved:  # the hook did not run: committing nothing would silently freeze the state
        raise RuntimeError("--speculative-ddtree-gdn-mode wy: the tree verify ran no GatedDeltaNet layer "
                           "through the wy kernels (is the forward_extend hook registered?)")
    if wy.check:
        logger.warning("DDTREE wy cross-check: %d layers, worst layer %d max|ours - sglang| %.3e (max|sglang| %.3e)",
                       len(wy.check), *_worst(wy.check))
        wy.check.clear()
    # Index tensors as the kernels take them (int32, contiguous), once for every launch.
    i32 = _Int32Once()
    accepted, accept_len = i32(accepted), i32(accept_len)
    layer0, _, slots = next(iter(wy.saved.values()))
    slots = i32(slots)  # one verify: every layer has the same slots
    bs, n = wy.parent.shape
    stacked = wy.pool_states
    w = wy.work
    commit_mode = wy.options["commit"]
    runs = _layer_runs(sorted(wy.saved), per_layer=commit_mode == "per-layer")
    if commit_mode == "cuda":
        from ..kernels.tree_cuda import gdn_tree_commit_from_x_layers as commit_layers
    else:
        commit_layers = tree_gdn_commit_from_x_layers
    passes = [(accept_len, None)]
    if track_slots is not None:  # the tracked state first: it reads the request's committed slot
        passes.insert(0, (i32(track_at.clamp(min=0)), i32(torch.where(track_at >= 0, track_slots.to(torch.int64), -1))))
    for lens, dst in passes:
        for lo, hi in runs:
            x = w["x"][lo:hi, : bs * n]
            w_tab, b_tab = _weight_tables(wy, lo, hi)
            # The recurrent commit reads the committed conv state: before the conv commit.
            commit_layers(stacked.temporal[lo:hi], slots, w["u"][lo:hi, :bs], w["G"][lo:hi, :bs], x,
                          w_tab, b_tab, layer0.conv_weights.shape[1], stacked.conv[0][lo:hi],
                          layer0.q_dim, layer0.num_k_heads, accepted, lens, dst_idx=dst)
            tree_conv_commit_layers(x, stacked.conv[0][lo:hi], slots, accepted, lens, dst_idx=dst)
    if wy.check_rows is not None:
        committed = [(layer.layer_id, *_commit_check(cache, slots, wy.check_rows, accepted, accept_len))
                     for layer, cache, _ in wy.saved.values()]
        logger.warning("DDTREE wy commit cross-check: worst layer %d max|ours - sglang| state %.3e (max %.3e) "
                       "conv %.3e (max %.3e)", *_worst(committed))
        tracked = track_at.ge(0) if track_slots is not None else None
        if tracked is not None and bool(tracked.any()):
            rows = [(layer.layer_id, *_commit_check(cache, track_slots[tracked], wy.check_rows[: bs][tracked],
                                                    accepted[tracked], track_at[tracked]))
                    for layer, cache, _ in wy.saved.values()]
            logger.warning("DDTREE wy track cross-check: %d tracked, worst layer %d max|ours - sglang| state %.3e "
                           "(max %.3e) conv %.3e (max %.3e)", int(tracked.sum()), *_worst(rows))
    wy.saved.clear()


def _weight_tables(wy: WyVerifyState, lo: int, hi: int):
    """Conv weight / bias address tables of pool layers ``lo .. hi - 1``, made once per run of
    layers and kept (the worker's cache across eager steps, the graph runner's across replays):
    the layers and their parameters do not change."""
    from ..kernels.gdn_tree import conv_weight_tables

    key = f"tables{lo}:{hi}"
    if key not in wy.tables:
        layers = [wy.saved[i][0] for i in range(lo, hi)]
        wy.tables[key] = conv_weight_tables([l.conv_weights for l in layers], [l.bias for l in layers],
                                            wy.work["x"].dtype, wy.work["x"].device)
    return wy.tables[key]


def _layer_runs(layers: List[int], per_layer: bool) -> List[Tuple[int, int]]:
    """``[lo, hi)`` runs of consecutive pool layers (one launch each); one per layer if asked."""
    runs: List[Tuple[int, int]] = []
    for li in layers:
        if runs and runs[-1][1] == li and not per_layer:
            runs[-1] = (runs[-1][0], li + 1)
        else:
            runs.append((li, li + 1))
    return runs


class _Int32Once:
    """``t.to(int32).contiguous()``, converted once per source tensor (the layers of a verify
    share one slot tensor)."""

    def __init__(self):
        self._seen = {}

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        out = self._seen.get(key)
        if out is None:
            out = self._seen[key] = t.to(torch.int32).contiguous()
        return out


def _worst(rows):
    """The ``(layer, diff, max, ...)`` row with the largest diff relative to its max."""
    return max(rows, key=lambda c: c[1] / max(c[2], 1e-30))


def _commit_check(cache, slots, rows, accepted, accept_len) -> Tuple[float, float, float, float]:
    """Our committed recurrent state and conv window of each request vs sglang's per-node
    snapshot of the same accepted node (written by its verify, which ran beside ours): the
    state in ``slots [bs]`` is that of path index ``accept_len [bs]`` (the last accepted node,
    or the tracked one for the tracking slots)."""
    last = accepted.gather(1, accept_len.long().unsqueeze(1)).squeeze(1).long()
    rows = rows[: slots.shape[0]].long()
    theirs_s = cache.intermediate_ssm[rows, last].float()
    ours_s = cache.temporal[slots.long()].float()
    theirs_c = cache.intermediate_conv_window[0][rows, last].float()  # [bs, C, W-1], as the pool
    ours_c = cache.conv[0][slots.long()].float()
    return ((ours_s - theirs_s).abs().max().item(), theirs_s.abs().max().item(),
            (ours_c - theirs_c).abs().max().item(), theirs_c.abs().max().item())


def _forward_extend(original, self, layer, forward_batch, save_kv_cache=True, q=None, k=None, v=None,
                    mixed_qkv=None, a=None, b=None, **kwargs):
    wy = getattr(getattr(forward_batch, "spec_info", None), "ddtree_wy", None)
    if (wy is None or not forward_batch.forward_mode.is_target_verify()
            or self._is_full_attn(layer, kwargs.get("layer_id"))):
        return original(self, layer, forward_batch, save_kv_cache, q, k, v, mixed_qkv, a, b, **kwargs)
    linear = self.linear_attn_backend
    if type(linear).__name__ != "GDNAttnBackend":
        raise NotImplementedError(
            f"--speculative-ddtree-gdn-mode wy supports GatedDeltaNet layers, not {type(linear).__name__}; "
            "use --speculative-ddtree-gdn-mode snapshot."
        )
    if not wy_check_enabled():
        return wy_target_verify(linear, layer, mixed_qkv, a, b, wy)
    cache = linear.req_to_token_pool.mamba2_layer_cache(layer.layer_id)
    slots = linear.forward_metadata.mamba_cache_indices[: wy.parent.shape[0]]
    conv0, ssm0 = cache.conv[0][slots].clone(), cache.temporal[slots].clone()
    ours = wy_target_verify(linear, layer, mixed_qkv, a, b, wy)
    theirs = original(self, layer, forward_batch, save_kv_cache, q, k, v, mixed_qkv, a, b, **kwargs)
    if not torch.equal(cache.temporal[slots], ssm0):
        logger.warning("DDTREE wy cross-check: layer %d recurrent state changed during verify", layer.layer_id)
    cache.conv[0][slots] = conv0  # sglang's verify conv may roll the state in place
    wy.check_rows = linear.verify_intermediate_state_indices
    # Tree nodes only: padding positions (parent -1 past the root) are verified by each path in
    # its own way and never read.
    bs, n = wy.parent.shape
    real = ((wy.parent >= 0) | (torch.arange(n, device=wy.parent.device) == 0)).reshape(-1)
    o_ours, o_theirs = ours.float().reshape(bs * n, -1)[real], theirs.float().reshape(bs * n, -1)[real]
    diff = (o_ours - o_theirs).abs().max().item()
    wy.check.append((layer.layer_id, diff, o_theirs.abs().max().item()))
    return ours


def register_gdn_wy_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _forward_extend, HookType.AROUND)
