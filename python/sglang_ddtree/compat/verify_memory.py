"""Memory a DDTREE target verify keeps beside sglang's static pools, and the automatic
``--mem-fraction-static`` made to leave room for it.

sglang 0.5.17 sizes what it leaves outside the static pools (weights, KV, mamba states) from the
chunked-prefill size and the decode graphs' batch size (``ServerArgs._handle_gpu_memory_settings``:
~1.5 MB per prefill token, 2 MB per captured batch size, at least 10 GiB on large GPUs). A DDTREE
verify graph holds more for as long as the server lives, per verify position (budget + 1 positions
per request, at the largest captured batch):

- sglang's shared fp32 logits buffer (``GraphSharedOutput``: ``vocab x 4`` bytes, 0.99 MB at
  Qwen3.6's 248320) and the lm_head's output in the model dtype that is copied into it;
- the attention backend's graph buffers, sized per verify token by the context length
  (``init_cuda_graph_state``: triton keeps int64 KV indices and a uint8 tree mask of
  ``context_len`` per token, 2.4 MB at 262144; flashinfer int32 indices and the mask; the
  page-table backends one row per request);
- in ``--speculative-ddtree-gdn-mode wy`` the commit's inputs of every GatedDeltaNet layer
  (``compat/gdn_wy.py``: the pre-conv projections ``x``, fp32 ``u`` and ``G``: 2.2 MB per position
  over Qwen3.6-27B's 48 GDN layers), one set for the most positions any width's graphs use
  (budget auto's widths carve theirs from the same memory, ``gdn_wy._carve``, made for that many
  positions before the first capture).

Shared by budget auto's widths: the fp32 logits buffer and the wy inputs (sized for the largest
requests x width). Per width: the attention backend's buffers (each width has its own backend)
and the graphs' activations, the lm_head output among them: session 16's 27B capture of width
129 at 64 requests after width 257 at 16 took 23.9 GB beside the shared buffers of its rows
(lm_head output 4.1 GB, attention 2.2 GB, and a second wy storage of 17.9 GB, since made once).

At 64 requests that is ~26 GiB for budget 64 and ~52 GiB for 128 on the 27B at its full context:
on the H200 the 64-request graph captures of budgets 64 / 128 ran out of memory (RESULTS.md
sessions 14 and 15; session 15's chain graph of 64 x 16 positions took 6.30 GB, this model 6.37).
sglang has no seam for a speculative algorithm's own reserve; the plugin's
``ServerArgs.__post_init__`` hook (registration.py) calls :func:`apply_verify_reserve` after sglang
resolved everything: an automatic fraction is lowered by the verify's need, a fraction the user
gave is kept, with a warning that names the value to use when the need is large beside what it
leaves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, Iterable, Optional

logger = logging.getLogger(__name__)

MIB = float(1 << 20)
# A verify whose need beyond sglang's own reserve is more than this share of what an explicit
# --mem-fraction-static leaves gets a warning (the rest is the prefill / eager activations').
WARN_SHARE = 0.5
# Below this automatic fraction the weights and pools cannot fit: refused at launch, naming what
# to lower, instead of sglang's later out-of-memory.
MIN_FRACTION = 0.1


# The listed buffers are what the verify graph keeps; its other activations (MLP and attention
# outputs at requests x width rows) come from the same graph pool and were within this share at
# the chain (session 15: 6.30 GB measured, 6.37 GB listed).
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
    if gdn_mode != "wy" or gdn_layers == 0:
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
    (compat/verify_widths.py), so those add."""
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


def lowered_fraction(fraction: float, gpu_mem_mb: float, need_mb: float) -> float:
    """``fraction`` less ``need_mb`` of ``gpu_mem_mb`` (3 decimals, as sglang rounds it)."""
    return round(fraction - need_mb / gpu_mem_mb, 3)


def apply_verify_reserve(server_args, fraction_given: bool, gpu_mem_mb: Optional[float], widths: Iterable[int],
                         fp: VerifyFootprint, per_width: Optional[Dict[int, int]] = None) -> Optional[float]:
    """Lower an automatic ``mem_fraction_static`` by the verify graphs' need; warn when a given one
    leaves too little for it. Returns the need in MiB (None without a known device memory)."""
    if not gpu_mem_mb or server_args.mem_fraction_static is None:
        return None
    requests = planned_requests(server_args)
    widths = sorted({int(w) for w in widths})
    need = verify_reserve_mb(fp, requests, widths, per_width)
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
