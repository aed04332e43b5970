"""Tree GatedDeltaNet layers of a DDTREE verify without per-node state snapshots
(``--speculative-ddtree-gdn-mode wy``).

In a target verify of a DDTREE server in wy mode, each GatedDeltaNet layer runs
(:meth:`TreeGdnWorkspace.verify_layer`, called by ``compat/linear_verify.py``):

- ``tree_conv`` over each node's ancestor window: reads the request's committed conv state,
  writes nothing to the pool;
- ``tree_gdn_verify`` (tree WY solve) from the request's committed recurrent state (read-only);

and keeps what the commit needs, per layer: the pre-conv inputs ``x [bs*W, C]`` (the commit
recomputes the path's keys from them), the solved values ``u [bs, W, HV, V]`` and the path
decays ``G [bs, W, HV]`` (fp32). After acceptance :meth:`TreeGdnWorkspace.commit` rebuilds each
layer's state of the last accepted node from at most L + 1 path terms and writes it, and the
path's conv window, into the request's slots in place (one launch per run of consecutive layers
for the states, one for the conv windows).

One workspace per scheduler process (a process serves one target model): the tree of the
verify in flight (``parent [rows, W]`` int32, -1 = root or padding; ancestor mask
``[rows, W, W]`` uint8, self included) and the commit inputs, per verify width. The target's
verify graphs are captured reading their width's static buffers (:meth:`begin_capture`); each
step copies its tree into them (:meth:`begin_step`) whether the forward then replays or runs
eagerly, so the layer and the commit read the same buffers either way. A step with more
requests than its width's graphs were captured for, or with no graphs (eager verify), gets
buffers of its own. The commit inputs of every width's static buffers are carved from one flat
storage: one width verifies and commits at a time, so they need the largest one's memory.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from ..config import WY_CHECK
from ..server_args import published_server_args, wy_server
from ..kernels.gdn_tree import (
    conv_weight_tables,
    tree_conv,
    tree_conv_commit_layers,
    tree_gdn_commit_from_x_layers,
    tree_gdn_verify,
)

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def commit_kernel() -> str:
    """``"cuda"`` (sgl-kernel's CUDA commit) where the extension loads, else ``"triton"``;
    decided once per process and logged when Triton serves on a CUDA device."""
    from ..kernels import tree_cuda

    why = tree_cuda.available()
    if why is None:
        return "cuda"
    if torch.cuda.is_available():
        logger.warning("DDTREE wy: CUDA commit kernel unavailable (%s); committing through Triton.", why)
    return "triton"


@dataclass
class WidthBuffers:
    """The tree and commit inputs of verifies ``width`` positions wide, for up to ``rows``
    requests. ``work``: ``x [layers, rows*W, C]``, ``u [layers, rows, W, HV, V]``,
    ``G [layers, rows, W, HV]``, made on the first layer that runs."""

    width: int
    rows: int
    parent: torch.Tensor
    anc: torch.Tensor
    static: bool
    work: Dict[str, torch.Tensor] = field(default_factory=dict)


class TreeGdnWorkspace:
    """See the module docstring. ``max_depth``: no root-to-node path has more non-root nodes
    (the tree builder's limit), which bounds the squarings of the verify's solve."""

    def __init__(self, max_depth: Optional[int]):
        self.max_depth = max_depth
        self.static: Dict[int, WidthBuffers] = {}
        self.storage: Dict[str, torch.Tensor] = {}
        self.storage_positions = 0
        self.layers: Dict[int, object] = {}  # pool layer index -> the GDN layer module
        self.pool = None  # sglang's mamba pool (the target's req_to_token_pool)
        self.pool_states = None  # its state stacked over layers (temporal, conv)
        self.tables: Dict[Tuple[int, int], Tuple[torch.Tensor, torch.Tensor]] = {}
        self.current: Optional[WidthBuffers] = None
        self.current_bs = 0
        # Developer cross-check (SGLANG_DDTREE_WY_CHECK): per layer (id, max |ours - sglang's|,
        # max |sglang's|), and sglang's per-node scratch row of each request.
        self.check: List[Tuple[int, float, float]] = []
        self.check_rows: Optional[torch.Tensor] = None

    # ------------------------------------------------------------------ the tree in flight

    def reserve_positions(self, positions: int) -> None:
        """Make the shared commit-input storage, when first needed, for at least ``positions``
        verify positions (requests x width): the most any width's graphs use, so a narrower
        width captured at more requests does not replace storage a wider one's graphs hold."""
        self.storage_positions = max(self.storage_positions, int(positions))

    def begin_capture(self, bs: int, width: int, rows: int, device) -> None:
        """A verify graph of ``bs`` requests x ``width`` is being captured; its width's static
        buffers (made for ``rows`` requests, every node its own root) are the tree it reads."""
        wb = self.static.get(width)
        if wb is None:
            eye = torch.eye(width, dtype=torch.uint8, device=device)
            wb = self.static[width] = WidthBuffers(
                width, int(rows), torch.full((int(rows), width), -1, dtype=torch.int32, device=device),
                eye.expand(int(rows), width, width).contiguous(), static=True)
        if bs > wb.rows:
            raise RuntimeError(f"DDTREE wy: a {bs}-request verify graph of width {width} captured after "
                               f"buffers for {wb.rows} requests were made")
        self.current, self.current_bs = wb, int(bs)

    def begin_step(self, parent: torch.Tensor, anc: torch.Tensor) -> None:
        """The step's tree (``parent [bs, W]``, ``anc [bs, W, W]``) goes into its width's static
        buffers when they hold ``bs`` requests, else into buffers of the step's own."""
        bs, width = parent.shape
        wb = self.static.get(width)
        if wb is not None and bs <= wb.rows:
            wb.parent[:bs].copy_(parent)
            wb.anc[:bs].copy_(anc)
        else:
            wb = WidthBuffers(width, bs, parent.to(torch.int32).contiguous(), anc.to(torch.uint8).contiguous(),
                              static=False)
        self.current, self.current_bs = wb, int(bs)

    # ------------------------------------------------------------------ one layer's verify

    def verify_layer(self, linear_backend, layer, mixed_qkv: torch.Tensor, a: torch.Tensor,
                     b: torch.Tensor) -> torch.Tensor:
        """One GatedDeltaNet layer of the verify in flight: ``mixed_qkv [T, C]`` pre-conv
        projections (q | k | v), ``a, b [T, HV]`` gate inputs, ``T = bs * W``. Returns the core
        attention output ``[T, HV, V]``. Raises NotImplementedError naming the flag to change
        for layers or pools the kernels do not cover."""
        wb, bs = self.current, self.current_bs
        if wb is None or bs * wb.width != mixed_qkv.shape[0]:
            raise RuntimeError(f"DDTREE wy: a verify of {mixed_qkv.shape[0]} tokens with no matching tree "
                               f"(begin_step / begin_capture: {bs} x {None if wb is None else wb.width})")
        if layer.activation not in ("silu", "swish"):
            raise NotImplementedError(f"--speculative-ddtree-gdn-mode wy: conv activation {layer.activation!r} "
                                      "is not supported; use --speculative-ddtree-gdn-mode snapshot.")
        pool = linear_backend.req_to_token_pool
        cache = pool.mamba2_layer_cache(layer.layer_id)
        conv_pool, ssm_pool = cache.conv[0], cache.temporal
        hv, v_dim, k_dim = layer.num_v_heads, layer.head_v_dim, layer.head_k_dim
        if ssm_pool.stride(0) != hv * v_dim * k_dim or not ssm_pool[0].is_contiguous():
            raise NotImplementedError("--speculative-ddtree-gdn-mode wy needs a contiguous per-slot recurrent "
                                      f"state pool (got strides {tuple(ssm_pool.stride())}); use "
                                      "--speculative-ddtree-gdn-mode snapshot.")
        if self.pool_states is None:
            self.pool, self.pool_states = pool, pool.get_speculative_mamba2_params_all_layers()
        li, n_layers = pool_layer_index(self.pool_states.temporal, ssm_pool)
        self.layers[li] = layer
        slots = linear_backend.forward_metadata.mamba_cache_indices[:bs]
        x, u_out, G_out = self._work_views(wb, bs, li, n_layers, mixed_qkv, hv, v_dim)
        # The conv also copies its input into the workspace (the commit's x), and writes q, k and
        # v each contiguous (what the verify reads): one launch, no copies.
        q, k, v = tree_conv(mixed_qkv, layer.conv_weights, layer.bias, conv_pool, slots, wb.parent[:bs],
                            activation=True, x_out=x, split=(layer.q_dim, layer.k_dim))
        T = q.shape[0]
        o, _, _ = tree_gdn_verify(q.view(T, layer.num_q_heads, layer.head_q_dim),
                                  k.view(T, layer.num_k_heads, k_dim), v.view(T, hv, v_dim),
                                  a, b, layer.A_log, layer.dt_bias, wb.anc[:bs], ssm_pool, slots,
                                  u_out=u_out, G_out=G_out, max_depth=self.max_depth)
        return o

    def _work_views(self, wb: WidthBuffers, bs: int, li: int, n_layers: int, mixed_qkv: torch.Tensor,
                    hv: int, v_dim: int):
        """Pool layer ``li``'s commit inputs cut to ``bs`` requests: ``x [bs*W, C]`` (for the copy
        of ``mixed_qkv`` the tree conv writes), ``u [bs, W, HV, V]``, ``G [bs, W, HV]``."""
        n, w = wb.width, wb.work
        if not w:
            dev, rows, C = mixed_qkv.device, wb.rows, mixed_qkv.shape[1]
            storage = self.storage if wb.static else None
            per = max(self.storage_positions, rows * n)
            w["x"] = carve(storage, "x", (n_layers, rows * n, C), mixed_qkv.dtype, dev, n_layers * per * C)
            w["u"] = carve(storage, "u", (n_layers, rows, n, hv, v_dim), torch.float32, dev,
                           n_layers * per * hv * v_dim)
            w["G"] = carve(storage, "G", (n_layers, rows, n, hv), torch.float32, dev, n_layers * per * hv)
        return w["x"][li, : bs * n], w["u"][li, :bs], w["G"][li, :bs]

    # ------------------------------------------------------------------ the commit

    def commit(self, slots: torch.Tensor, accepted: torch.Tensor, accept_len: torch.Tensor,
               track_slots: Optional[torch.Tensor] = None, track_at: Optional[torch.Tensor] = None) -> None:
        """Write every verified layer's state of the last accepted node (recurrent state and conv
        window) into ``slots [bs]``. ``accepted [bs, P]`` verify positions of the path, root
        first, -1 padded; ``accept_len [bs]`` accepted drafts.

        Prefix-cache state tracking (sglang's mamba extra buffer): ``track_slots [bs]`` the
        requests' tracking slots, ``track_at [bs]`` the path index whose state the radix cache
        keeps (-1: none this step); that state is written first, from the same committed state
        the main commit then advances."""
        wb = self.current
        if wb is None or not self.layers or not wb.work:
            raise RuntimeError("--speculative-ddtree-gdn-mode wy: the tree verify ran no GatedDeltaNet layer "
                               "through the tree kernels (is compat/linear_verify.py's hook registered?)")
        bs, n = accepted.shape[0], wb.width
        if self.check:
            logger.warning("DDTREE wy cross-check: %d layers, worst layer %d max|ours - sglang| %.3e "
                           "(max|sglang| %.3e)", len(self.check), *_worst(self.check))
            self.check.clear()
        i32 = _Int32Once()
        accepted, accept_len, slots = i32(accepted), i32(accept_len), i32(slots[:bs])
        if commit_kernel() == "cuda":
            from ..kernels.tree_cuda import gdn_tree_commit_from_x_layers as commit_layers
        else:
            commit_layers = tree_gdn_commit_from_x_layers
        layer0 = next(iter(self.layers.values()))
        stacked, w = self.pool_states, wb.work
        passes = [(accept_len, None)]
        if track_slots is not None:  # the tracked state first: it reads the request's committed slot
            passes.insert(0, (i32(track_at.clamp(min=0)),
                              i32(torch.where(track_at >= 0, track_slots.to(torch.int64), -1))))
        for lens, dst in passes:
            for lo, hi in layer_runs(sorted(self.layers)):
                x = w["x"][lo:hi, : bs * n]
                w_tab, b_tab = self._weight_tables(lo, hi, x.dtype, x.device)
                # The recurrent commit reads the committed conv state: before the conv commit.
                commit_layers(stacked.temporal[lo:hi], slots, w["u"][lo:hi, :bs], w["G"][lo:hi, :bs], x,
                              w_tab, b_tab, layer0.conv_weights.shape[1], stacked.conv[0][lo:hi],
                              layer0.q_dim, layer0.num_k_heads, accepted, lens, dst_idx=dst)
                tree_conv_commit_layers(x, stacked.conv[0][lo:hi], slots, accepted, lens, dst_idx=dst)
        if self.check_rows is not None:
            self._log_commit_check(slots, accepted, accept_len, track_slots, track_at)
        self.current = None

    def _weight_tables(self, lo: int, hi: int, dtype, device):
        """Conv weight / bias address tables of pool layers ``lo .. hi - 1``, made once (the
        layers' parameters do not move; rebuilding them is a host-to-device copy)."""
        if (lo, hi) not in self.tables:
            layers = [self.layers[i] for i in range(lo, hi)]
            self.tables[(lo, hi)] = conv_weight_tables([l.conv_weights for l in layers], [l.bias for l in layers],
                                                       dtype, device)
        return self.tables[(lo, hi)]

    # ------------------------------------------------------------------ developer cross-check

    def verify_layer_checked(self, original, linear_backend, layer, mixed_qkv, a, b) -> torch.Tensor:
        """:meth:`verify_layer`, then sglang's per-node verify (``original()``) on the same inputs
        with the request's conv state restored after it; logs the largest output difference over
        the tree's nodes and keeps sglang's per-node rows for the commit check. Serves ours."""
        bs = self.current_bs
        cache = linear_backend.req_to_token_pool.mamba2_layer_cache(layer.layer_id)
        slots = linear_backend.forward_metadata.mamba_cache_indices[:bs]
        conv0, ssm0 = cache.conv[0][slots].clone(), cache.temporal[slots].clone()
        ours = self.verify_layer(linear_backend, layer, mixed_qkv, a, b)
        theirs = original()
        if not torch.equal(cache.temporal[slots], ssm0):
            logger.warning("DDTREE wy cross-check: layer %d recurrent state changed during verify", layer.layer_id)
        cache.conv[0][slots] = conv0  # sglang's verify conv may roll the state in place
        self.check_rows = linear_backend.verify_intermediate_state_indices
        # Tree nodes only: padding positions are verified by each path in its own way, never read.
        parent = self.current.parent[:bs]
        n = parent.shape[1]
        real = ((parent >= 0) | (torch.arange(n, device=parent.device) == 0)).reshape(-1)
        o_ours, o_theirs = ours.float().reshape(bs * n, -1)[real], theirs.float().reshape(bs * n, -1)[real]
        self.check.append((layer.layer_id, (o_ours - o_theirs).abs().max().item(), o_theirs.abs().max().item()))
        return ours

    def _log_commit_check(self, slots, accepted, accept_len, track_slots, track_at) -> None:
        bs = slots.shape[0]
        rows = [(layer.layer_id, *_commit_check(self._cache(layer), slots, self.check_rows, accepted, accept_len))
                for layer in self.layers.values()]
        logger.warning("DDTREE wy commit cross-check: worst layer %d max|ours - sglang| state %.3e (max %.3e) "
                       "conv %.3e (max %.3e)", *_worst(rows))
        tracked = track_at.ge(0) if track_slots is not None else None
        if tracked is not None and bool(tracked.any()):
            rows = [(layer.layer_id, *_commit_check(self._cache(layer), track_slots[tracked],
                                                    self.check_rows[:bs][tracked], accepted[tracked],
                                                    track_at[tracked]))
                    for layer in self.layers.values()]
            logger.warning("DDTREE wy track cross-check: %d tracked, worst layer %d max|ours - sglang| state "
                           "%.3e (max %.3e) conv %.3e (max %.3e)", int(tracked.sum()), *_worst(rows))

    def _cache(self, layer):
        return self.pool.mamba2_layer_cache(layer.layer_id)


_WORKSPACE: Optional[TreeGdnWorkspace] = None


def workspace() -> TreeGdnWorkspace:
    """This process's workspace, made on first use with the server's depth limit."""
    global _WORKSPACE
    if _WORKSPACE is None:
        sa = published_server_args()
        depth = getattr(sa, "speculative_ddtree_max_depth", None)
        _WORKSPACE = TreeGdnWorkspace(None if depth is None else int(depth))
    return _WORKSPACE


def reset_workspace() -> None:
    """Forget this process's workspace (tests)."""
    global _WORKSPACE
    _WORKSPACE = None


def cross_check_enabled() -> bool:
    return bool(WY_CHECK.get())


def scratch_positions(server_args) -> Optional[int]:
    """Verify positions sglang's per-node linear-attention scratch needs on a DDTREE server in
    wy mode: 1 (the tree kernels keep no per-node state; sglang's code indexes the buffer, so
    it cannot be absent), or None where sglang's own sizing stands (other servers, the snapshot
    mode, and the cross-check, which runs sglang's per-node verify too)."""
    if not wy_server(server_args):
        return None
    return None if cross_check_enabled() else 1


# --------------------------------------------------------------------------- helpers


def pool_layer_index(stacked: torch.Tensor, ssm_pool: torch.Tensor) -> Tuple[int, int]:
    """``(index of this layer's state in the pool's stacked [L, slots, HV, V, K] tensor, L)``,
    from where the layer's view starts."""
    step = stacked.stride(0) * stacked.element_size()
    li, rem = divmod(ssm_pool.data_ptr() - stacked.data_ptr(), step)
    if rem or not 0 <= li < stacked.shape[0] or stacked[li].data_ptr() != ssm_pool.data_ptr():
        raise NotImplementedError("--speculative-ddtree-gdn-mode wy: a layer's state is not a layer of the "
                                  "pool's stacked state tensor; use --speculative-ddtree-gdn-mode snapshot.")
    return int(li), int(stacked.shape[0])


def carve(storage: Optional[Dict[str, torch.Tensor]], name: str, shape: Tuple[int, ...], dtype: torch.dtype,
          device, min_numel: int = 0) -> torch.Tensor:
    """A tensor of ``shape`` at the start of ``storage[name]`` (replaced by a larger one, of at
    least ``min_numel`` elements, when too small or of another dtype; tensors carved before keep
    the old storage alive), or a tensor of its own when ``storage`` is None."""
    numel = 1
    for d in shape:
        numel *= int(d)
    if storage is None:
        return torch.empty(shape, dtype=dtype, device=device)
    flat = storage.get(name)
    if flat is None or flat.numel() < numel or flat.dtype != dtype or flat.device != torch.device(device):
        flat = storage[name] = torch.empty(max(numel, int(min_numel)), dtype=dtype, device=device)
    return flat[:numel].view(shape)


def layer_runs(layers: List[int]) -> List[Tuple[int, int]]:
    """``[lo, hi)`` runs of consecutive pool layers (one commit launch each)."""
    runs: List[Tuple[int, int]] = []
    for li in layers:
        if runs and runs[-1][1] == li:
            runs[-1] = (runs[-1][0], li + 1)
        else:
            runs.append((li, li + 1))
    return runs


class _Int32Once:
    """``t.to(int32).contiguous()``, converted once per source tensor. The sources are kept
    alive with their conversions: a freed temporary's memory is handed to the next one by the
    caching allocator, and a key by address alone would then return the old conversion."""

    def __init__(self):
        self._seen = {}

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        hit = self._seen.get(key)
        if hit is None:
            hit = self._seen[key] = (t, t.to(torch.int32).contiguous())
        return hit[1]


def _worst(rows):
    """The ``(layer, diff, max, ...)`` row with the largest diff relative to its max."""
    return max(rows, key=lambda c: c[1] / max(c[2], 1e-30))


def _commit_check(cache, slots, rows, accepted, accept_len) -> Tuple[float, float, float, float]:
    """Our committed recurrent state and conv window in ``slots [bs]`` vs sglang's per-node
    snapshot of path index ``accept_len [bs]`` (written by its verify, which ran beside ours)."""
    last = accepted.gather(1, accept_len.long().unsqueeze(1)).squeeze(1).long()
    rows = rows[: slots.shape[0]].long()
    theirs_s = cache.intermediate_ssm[rows, last].float()
    ours_s = cache.temporal[slots.long()].float()
    theirs_c = cache.intermediate_conv_window[0][rows, last].float()
    ours_c = cache.conv[0][slots.long()].float()
    return ((ours_s - theirs_s).abs().max().item(), theirs_s.abs().max().item(),
            (ours_c - theirs_c).abs().max().item(), theirs_c.abs().max().item())
