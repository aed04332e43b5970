"""Memory a DDTREE target verify keeps beside sglang's static pools, and the automatic
``--mem-fraction-static`` made to leave room for it.

sglang 0.5.17 sizes what it leaves outside the static pools (weights, KV, mamba states) from the
chunked-prefill size and the decode graphs' batch size (``ServerArgs._handle_gpu_memory_settings``:
~1.5 MB per prefill token, 2 MB per captured batch size). A DDTREE verify graph holds more for as
long as the server lives, per captured width (budget + 1 positions per request):

- the fp32 logits of every verify position (``vocab x 4`` bytes: 0.99 MB at Qwen3.6's 248320);
- in ``--speculative-ddtree-gdn-mode wy`` the commit's inputs of every GatedDeltaNet layer
  (``compat/gdn_wy.py``: the pre-conv projections ``x``, fp32 ``u`` and ``G``: 2.1 MB per position
  over Qwen3.6-27B's 48 GDN layers), one set for the widest width (budget auto's other widths
  carve theirs from the same memory, ``gdn_wy._carve``).

At 64 requests that is ~13 GB for budget 64 and ~26 GB for 128 on the 27B: on the H200 the
sweep's 64-request graph captures of budgets 64 / 128 / 256 and of budget auto ran out of memory
(RESULTS.md session 14). sglang has no seam for a speculative algorithm's own reserve; the plugin's
``ServerArgs.__post_init__`` hook (registration.py) calls :func:`apply_verify_reserve` after sglang
resolved everything: an automatic fraction is lowered by the verify's need, a fraction the user
gave is kept, with a warning that names the value to use when the need is large beside what it
leaves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Optional

logger = logging.getLogger(__name__)

MIB = float(1 << 20)
# A verify whose need beyond sglang's own reserve is more than this share of what an explicit
# --mem-fraction-static leaves gets a warning (the rest is the prefill / eager activations').
WARN_SHARE = 0.5
# Below this automatic fraction the weights and pools cannot fit: refused at launch, naming what
# to lower, instead of sglang's later out-of-memory.
MIN_FRACTION = 0.1


@dataclass(frozen=True)
class VerifyFootprint:
    """Bytes a captured verify graph keeps per verify position (one request, one tree node)."""

    logits: int  # fp32 logits over the vocabulary
    wy: int  # wy commit inputs over the GDN layers (0: not wy, or no GDN layers)


def verify_footprint(hf_config, gdn_mode: Optional[str], tp_size: int = 1, dtype_bytes: int = 2) -> VerifyFootprint:
    """Per-position bytes for a target with ``hf_config`` (its ``text_config`` if it has one) on one
    of ``tp_size`` ranks (the value heads split; the logits are gathered to the full vocabulary)."""
    text = getattr(hf_config, "text_config", None) or hf_config
    logits = int(text.vocab_size) * 4
    # sglang's hybrid configs list their GDN layers (what its state pool is built from); a plain
    # HF config has layer_types.
    ids = getattr(text, "linear_layer_ids", None)
    gdn_layers = (len(ids) if ids is not None else
                  sum(1 for t in (getattr(text, "layer_types", None) or []) if t == "linear_attention"))
    if gdn_mode != "wy" or gdn_layers == 0:
        return VerifyFootprint(logits, 0)
    tp = max(1, int(tp_size))
    hk = int(text.linear_num_key_heads) // tp
    hv = int(text.linear_num_value_heads) // tp
    dk, dv = int(text.linear_key_head_dim), int(text.linear_value_head_dim)
    conv_dim = 2 * hk * dk + hv * dv
    per_layer = conv_dim * int(dtype_bytes) + hv * dv * 4 + hv * 4  # x (model dtype), u, G (fp32)
    return VerifyFootprint(logits, gdn_layers * per_layer)


def verify_reserve_mb(fp: VerifyFootprint, requests: int, widths: Iterable[int]) -> float:
    """MiB the verify graphs of ``requests`` requests keep at the widest of ``widths``: the logits
    (every width's graphs share the graph pool for their transient tensors) and the wy commit
    inputs (one storage for every width and batch size)."""
    ws = [int(w) for w in widths]
    if not ws or requests <= 0:
        return 0.0
    return requests * max(ws) * (fp.logits + fp.wy) / MIB


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
                         fp: VerifyFootprint) -> Optional[float]:
    """Lower an automatic ``mem_fraction_static`` by the verify graphs' need; warn when a given one
    leaves too little for it. Returns the need in MiB (None without a known device memory)."""
    if not gpu_mem_mb or server_args.mem_fraction_static is None:
        return None
    requests = planned_requests(server_args)
    widths = sorted({int(w) for w in widths})
    need = verify_reserve_mb(fp, requests, widths)
    frac = float(server_args.mem_fraction_static)
    if not fraction_given:
        lowered = lowered_fraction(frac, gpu_mem_mb, need)
        if lowered < MIN_FRACTION:
            raise ValueError(
                f"DDTREE: the verify graphs of {requests} requests x widths {widths} need ~{need / 1024:.1f} GiB "
                f"beside the static pools, which leaves --mem-fraction-static {lowered:.3f} of this device's "
                f"{gpu_mem_mb / 1024:.1f} GiB: lower --speculative-ddtree-budget, or the requests a verify runs for "
                "(--max-running-requests / --cuda-graph-max-bs-decode).")
        server_args.mem_fraction_static = lowered
        logger.info("DDTREE: --mem-fraction-static %.3f (sglang's automatic %.3f less %.2f GiB for the verify "
                    "graphs: %d requests x widths %s)", server_args.mem_fraction_static, frac, need / 1024,
                    requests, widths)
    elif need > WARN_SHARE * (1.0 - frac) * gpu_mem_mb:
        logger.warning(
            "DDTREE: the verify graphs of %d requests x widths %s keep ~%.1f GiB beside the static pools, "
            "more than half of what --mem-fraction-static %.3f leaves (%.1f GiB); if graph capture runs out of "
            "memory, use --mem-fraction-static %.3f or lower (or fewer requests: --cuda-graph-max-bs-decode / "
            "--max-running-requests, or a smaller --speculative-ddtree-budget).",
            requests, widths, need / 1024, frac, (1.0 - frac) * gpu_mem_mb / 1024,
            lowered_fraction(frac, gpu_mem_mb, need))
    return need
