"""Memory a DDTREE target verify keeps beside sglang's static pools, and the automatic
``--mem-fraction-static`` lowered to leave room for it.

sglang sizes what it leaves outside the static pools (weights, KV, mamba states) from the
chunked-prefill size and the decode graphs' batch size (``ServerArgs._handle_gpu_memory_settings``).
A DDTREE verify graph holds more for as long as the server lives, per verify position (budget + 1
positions per request, at the largest captured batch):

- sglang's shared fp32 logits buffer (``GraphSharedOutput``: ``vocab x 4`` bytes) and the
  lm_head's output in the model dtype that is copied into it;
- the attention backend's graph buffers, sized per verify token by the context length
  (triton: int64 KV indices and a uint8 tree mask of ``context_len`` per token, plus fp32
  split-KV partials; flashinfer: int32 indices and the mask; page-table backends: one row per
  request);
- in ``--speculative-ddtree-gdn-mode wy`` the commit inputs of every GatedDeltaNet layer
  (``engine/tree_gdn.py``: ``x`` in the model dtype, fp32 ``u`` and ``G``), one storage for the
  most positions any width's graphs use.

Shared by budget auto's widths: the fp32 logits buffer and the wy inputs. Per width: the
attention backend's buffers (each width has its own backend) and the graphs' activations, the
lm_head output among them. :data:`MARGIN` covers the activations not listed.

sglang has no seam for a speculative algorithm's own reserve; the spec class's launch-time
handling (``spec_algo.py``) calls :func:`reserve_for_server`: an automatic fraction is lowered by
the verify's need (refused at launch when too little would remain), a fraction the user gave is
kept, with a warning naming the value to use when the need is large beside what it leaves.
Measured capture sizes the model is pinned to: ``test/engine/test_verify_memory.py``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, Iterable, Optional

from ..compat import releases
from ..server_args import GDN_WY

logger = logging.getLogger(__name__)

MIB = float(1 << 20)
# A verify whose need beyond sglang's own reserve is more than this share of what an explicit
# --mem-fraction-static leaves gets a warning (the rest is the prefill / eager activations').
WARN_SHARE = 0.5
# Below this automatic fraction the weights and pools cannot fit: refused at launch, naming what
# to lower, instead of sglang's later out-of-memory.
MIN_FRACTION = 0.1


# The listed buffers are what the verify graph keeps; its other activations (MLP and attention
# outputs at requests x width rows) come from the same graph pool, within this share.
MARGIN = 1.1
# Backends whose graph buffers hold KV indices (and the tree mask) per verify token over the
# whole context, bytes per token per context position. Unknown or not yet resolved backends are
# counted as triton (the largest), so the reserve errs towards a smaller KV pool, not an OOM.
_PER_TOKEN_CONTEXT_BYTES = {"triton": 8 + 1, "flashinfer": 4 + 1}
_PER_REQUEST_BACKENDS = ("fa3", "fa4", "flashmla", "cutlass_mla", "trtllm_mha", "trtllm_mla", "aiter")


@dataclass(frozen=True)
class VerifyFootprint:
    """Bytes a captured verify graph keeps per verify position (one request, one tree node)."""

    logits: int  # sglang's shared fp32 logits buffer
    logits_model: int  # the lm_head output in the model dtype
    wy: int  # wy commit inputs over the GDN layers (0: not wy, or no GDN layers)
    attention: int = 0  # the attention backend's graph buffers

    @property
    def per_position(self) -> int:
        return self.logits + self.logits_model + self.wy + self.attention


def attention_graph_bytes(backend: Optional[str], context_len: int, heads: int, head_dim: int,
                          kv_splits: int = 8) -> int:
    """Per verify token: what the attention backend's ``init_cuda_graph_state`` sizes by tokens
    (sglang 0.5.17). ``heads`` query heads on this rank; triton also keeps fp32 split-KV partial
    outputs and their log-sum-exps (``kv_splits`` = --triton-attention-num-kv-splits)."""
    name = backend or "triton"
    ctx = int(context_len)
    if name in _PER_REQUEST_BACKENDS:
        return 4 * ctx // 16  # one page-table row per request, over >= 16 positions per request
    if name not in _PER_TOKEN_CONTEXT_BYTES:
        name = "triton"
    partials = heads * kv_splits * (head_dim + 1) * 4 if name == "triton" else 0
    return _PER_TOKEN_CONTEXT_BYTES[name] * ctx + partials


def verify_footprint(hf_config, gdn_mode: Optional[str], tp_size: int = 1, dtype_bytes: int = 2,
                     attention_backend: Optional[str] = None, context_len: Optional[int] = None,
                     kv_splits: int = 8) -> VerifyFootprint:
    """Per-position bytes for a target with ``hf_config`` (its ``text_config`` if it has one) on one
    of ``tp_size`` ranks (the heads split; the logits are gathered to the full vocabulary).
    ``context_len`` None: the config's ``max_position_embeddings``."""
    text = getattr(hf_config, "text_config", None) or hf_config
    tp = max(1, int(tp_size))
    vocab = int(text.vocab_size)
    heads = int(getattr(text, "num_attention_heads", 0) or 0)
    head_dim = int(getattr(text, "head_dim", 0) or (int(getattr(text, "hidden_size", 0) or 0) // max(1, heads)))
    ctx = context_len or getattr(text, "max_position_embeddings", None) or 0
    attention = attention_graph_bytes(attention_backend, int(ctx), max(1, heads // tp), head_dim, kv_splits)
    base = dict(logits=vocab * 4, logits_model=vocab * int(dtype_bytes), attention=attention)
    # sglang's hybrid configs list their GDN layers (what its state pool is built from); a plain
    # HF config has layer_types.
    ids = getattr(text, "linear_layer_ids", None)
    gdn_layers = (len(ids) if ids is not None else
                  sum(1 for t in (getattr(text, "layer_types", None) or []) if t == "linear_attention"))
    if gdn_mode != GDN_WY or gdn_layers == 0:
        return VerifyFootprint(wy=0, **base)
    hk = int(text.linear_num_key_heads) // tp
    hv = int(text.linear_num_value_heads) // tp
    dk, dv = int(text.linear_key_head_dim), int(text.linear_value_head_dim)
    conv_dim = 2 * hk * dk + hv * dv
    per_layer = conv_dim * int(dtype_bytes) + hv * dv * 4 + hv * 4  # x (model dtype), u, G (fp32)
    return VerifyFootprint(wy=gdn_layers * per_layer, **base)


def verify_reserve_mb(fp: VerifyFootprint, requests: int, widths: Iterable[int],
                      per_width: Optional[Dict[int, int]] = None) -> float:
    """MiB the verify graphs of ``requests`` requests keep for ``widths`` (budget auto: one graph
    set per width, each up to its own batch size in ``per_width`` when the policy caps it), with
    :data:`MARGIN` for the activations not listed. The fp32 logits buffer and the wy commit
    inputs are shared by every width (the largest width x batch counts); the lm_head output is
    in each width's graphs and each width has an attention backend of its own
    (engine/verify_widths.py), so those add."""
    ws = sorted({int(w) for w in widths})
    if not ws or requests <= 0:
        return 0.0
    rows = [min(requests, (per_width or {}).get(w, requests)) * w for w in ws]
    shared = fp.logits + fp.wy
    per_width_graphs = fp.logits_model + fp.attention
    return MARGIN * (max(rows) * shared + sum(rows) * per_width_graphs) / MIB


def planned_requests(server_args) -> int:
    """The most requests one verify runs for: --max-running-requests if given, else the decode
    graphs' largest batch size (sglang's own rule where it sizes a decode server's activations)."""
    if server_args.max_running_requests:
        return int(server_args.max_running_requests)
    cfg = getattr(getattr(server_args, "cuda_graph_config", None), "decode", None)
    return int(getattr(cfg, "max_bs", None) or 1)


def verify_need(server_args, fp: VerifyFootprint, widths: Iterable[int],
                per_width: Optional[Dict[int, int]] = None) -> tuple:
    """``(need in MiB, requests, verify widths ascending)``: :func:`verify_reserve_mb` for the
    :func:`planned_requests` of ``server_args``."""
    requests = planned_requests(server_args)
    return verify_reserve_mb(fp, requests, widths, per_width), requests, sorted({int(w) for w in widths})


def lowered_fraction(fraction: float, gpu_mem_mb: float, need_mb: float) -> float:
    """``fraction`` less ``need_mb`` of ``gpu_mem_mb`` (3 decimals, as sglang rounds it)."""
    return round(fraction - need_mb / gpu_mem_mb, 3)


def apply_verify_reserve(server_args, fraction_given: bool, gpu_mem_mb: Optional[float], widths: Iterable[int],
                         fp: VerifyFootprint, per_width: Optional[Dict[int, int]] = None) -> Optional[float]:
    """Lower an automatic ``mem_fraction_static`` by the verify graphs' need; warn when a given one
    leaves too little for it. Returns the need in MiB (None without a known device memory)."""
    if not gpu_mem_mb or server_args.mem_fraction_static is None:
        return None
    need, requests, widths = verify_need(server_args, fp, widths, per_width)
    frac = float(server_args.mem_fraction_static)
    if not fraction_given:
        lowered = lowered_fraction(frac, gpu_mem_mb, need)
        if lowered < MIN_FRACTION:
            raise ValueError(
                f"DDTREE: the verify graphs of {requests} requests x widths {widths} need ~{need / 1024:.1f} GiB "
                f"beside the static pools, which leaves --mem-fraction-static {lowered:.3f} of this device's "
                f"{gpu_mem_mb / 1024:.1f} GiB: lower --speculative-ddtree-budget, or the requests a verify runs for "
                "(--max-running-requests / --cuda-graph-max-bs-decode), or --context-length (the attention "
                "backend's graph buffers grow with it).")
        server_args.mem_fraction_static = lowered
        logger.info("DDTREE: --mem-fraction-static %.3f (sglang's automatic %.3f less %.2f GiB for the verify "
                    "graphs: %d requests x widths %s)", server_args.mem_fraction_static, frac, need / 1024,
                    requests, widths)
    elif need > WARN_SHARE * (1.0 - frac) * gpu_mem_mb:
        logger.warning(
            "DDTREE: the verify graphs of %d requests x widths %s keep ~%.1f GiB beside the static pools, "
            "more than half of what --mem-fraction-static %.3f leaves (%.1f GiB); if graph capture runs out of "
            "memory, use --mem-fraction-static %.3f or lower (or fewer requests: --cuda-graph-max-bs-decode / "
            "--max-running-requests, a smaller --speculative-ddtree-budget, or a shorter --context-length).",
            requests, widths, need / 1024, frac, (1.0 - frac) * gpu_mem_mb / 1024,
            lowered_fraction(frac, gpu_mem_mb, need))
    return need


def reserve_for_server(server_args, block_size: int, fraction_given: bool) -> Optional[float]:
    """:func:`apply_verify_reserve` for a resolved DDTREE server: the verify's per-position bytes
    for its target, attention backends and context length, its verify widths and, under budget
    auto, the batch size each width's graphs go up to. Returns the need in MiB."""
    from sglang.srt.utils.common import get_device_memory_capacity

    gpu_mem = get_device_memory_capacity(server_args.device)
    fp, widths, per_width = server_verify_shape(server_args, block_size)
    return apply_verify_reserve(server_args, fraction_given, gpu_mem, widths, fp, per_width)


def server_need(server_args, block_size: int) -> tuple:
    """``(need in MiB, requests, verify widths)`` of a resolved DDTREE server's verify graphs, as
    :func:`reserve_for_server` counts them (nothing changed)."""
    return verify_need(server_args, *server_verify_shape(server_args, block_size))


def server_verify_shape(server_args, block_size: int) -> tuple:
    """``(VerifyFootprint, verify widths, per-width batch caps)`` of a resolved DDTREE server."""
    from ..core.widths import largest_capture_bs
    from ..server_args import ddtree_verify_widths, ddtree_width_caps, is_hybrid_target

    hybrid = is_hybrid_target(server_args)
    model_config = releases.model_config(server_args)
    # The verify runs through the decode or the prefill attention backend depending on the
    # backend pairing: the one whose graph buffers are larger counts (None: not resolved yet,
    # counted as triton's).
    backends = {server_args.decode_attention_backend or server_args.attention_backend,
                server_args.prefill_attention_backend or server_args.attention_backend}
    fp = max((verify_footprint(model_config.hf_config,
                               server_args.speculative_ddtree_gdn_mode if hybrid else None,
                               tp_size=server_args.tp_size,
                               dtype_bytes=4 if str(server_args.dtype) in ("float32", "float") else 2,
                               attention_backend=b,
                               context_len=server_args.context_length or getattr(model_config, "context_len", None),
                               kv_splits=int(getattr(server_args, "triton_attention_num_kv_splits", 8) or 8))
              for b in backends), key=lambda f: f.per_position)
    caps = ddtree_width_caps(server_args, block_size)
    bs_list = getattr(getattr(getattr(server_args, "cuda_graph_config", None), "decode", None), "bs", None)
    per_width = ({w: bs for w, bs in largest_capture_bs(bs_list, caps).items() if caps[w] is not None}
                 if bs_list else {})
    return fp, ddtree_verify_widths(server_args, block_size, caps), per_width
