"""Exact, totally ordered int64 sort keys for fp32 scores with tie-break fields.

``torch.topk`` and ``torch.sort`` break ties between equal values in an unspecified order.
The DDTree tree must be identical on every device, rank and batch layout, so every ordering
decision goes through an int64 key whose integer order is: larger fp32 value first, then the
tie-break field(s) given by the caller. Keys are unique whenever the tie-break fields are.
"""

from __future__ import annotations

import torch

_SIGN_CLEAR = 0x7FFFFFFF


def orderable_fp32(x: torch.Tensor) -> torch.Tensor:
    """Map fp32 values to int64 so integer order equals float order (-0.0 counts as +0.0).

    NaN has no place in an order; callers must not pass it (draft logits never contain NaN
    unless the model is broken, and then the tests catch it upstream).
    """
    x = x.to(torch.float32) + 0.0  # canonicalise -0.0
    bits = x.view(torch.int32)
    flipped = torch.where(bits < 0, bits ^ _SIGN_CLEAR, bits)
    return flipped.to(torch.int64)


def desc_value_asc_tiebreak(value: torch.Tensor, tiebreak: torch.Tensor, tiebreak_bits: int) -> torch.Tensor:
    """Key whose *descending* order is (value descending, tiebreak ascending).

    ``tiebreak`` must be a non-negative integer tensor below ``2**tiebreak_bits`` (<= 31 bits).
    """
    if not 0 < tiebreak_bits <= 31:
        raise ValueError(f"tiebreak_bits must be in 1..31, got {tiebreak_bits}")
    span = 1 << tiebreak_bits
    return orderable_fp32(value) * span + (span - 1 - tiebreak.to(torch.int64))


def value_of_key(key: torch.Tensor, tiebreak_bits: int) -> torch.Tensor:
    """Recover the fp32 value from a key built by :func:`desc_value_asc_tiebreak`."""
    flipped = torch.div(key, 1 << tiebreak_bits, rounding_mode="floor").to(torch.int32)
    bits = torch.where(flipped < 0, flipped ^ _SIGN_CLEAR, flipped)
    return bits.view(torch.float32)


def bits_for(n: int) -> int:
    """Bits needed to hold integers 0..n-1 (at least 1)."""
    return max(1, (max(n, 1) - 1).bit_length())
