"""Drafter traces: what a DFlash drafter proposes at every committed position of a target's greedy
output, enough to rebuild the draft tree of any budget and to know what the target accepts
(docs/traces.md describes the format and how it is recorded).

One file per prompt set, ``torch.save`` of a dict::

    {"format": FORMAT,
     "meta": {str: str | int | float | bool},
     "requests": [{"rid": str, "finish_reason": str,
                   "prompt": int32 [P], "output": int32 [T],
                   "topk_logprobs": float32 [T, L, K], "topk_ids": int32 [T, L, K]}, ...]}

``output`` is the target's greedy continuation of ``prompt`` (T tokens, the last one EOS when
``finish_reason`` is ``"stop"``). Row ``p`` of the top-K arrays is the drafter's block proposal
from state ``p``: committed = ``prompt + output[:p]``, the block's root the last committed token
``output[p - 1]``; depth ``d = 1..L`` (index ``d - 1``) holds the K best log-probs (log-softmax
over the full vocabulary, fp32, sorted descending, ties to the lower id) and their token ids.
Row 0 holds no proposal (log-probs ``-inf``, ids ``-1``): a serving engine's first output token
comes from the prefill, so its first draft is at state 1. From state ``p`` the target's greedy
token at the root is ``output[p]``; a depth-``d`` node is accepted iff its path's tokens are
``output[p : p + d]``.

Loaded with ``torch.load(weights_only=True)``: plain containers and tensors only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Union

import torch

FORMAT = "sglang-ddtree-trace/1"
Meta = Dict[str, Union[str, int, float, bool]]
PLAIN = (str, int, float, bool)


class TopKShape:
    """``depth`` and ``topk`` of a ``topk_ids`` tensor ``[..., L, K]`` (the drafter's per-depth
    candidates): a base of the trace records."""

    topk_ids: torch.Tensor

    @property
    def depth(self) -> int:
        """L, the draft depths per proposal (the drafter's block size - 1)."""
        return int(self.topk_ids.shape[-2])

    @property
    def topk(self) -> int:
        """K, the candidates recorded per depth."""
        return int(self.topk_ids.shape[-1])


@dataclass
class RequestTrace(TopKShape):
    """One request's trace (module docstring): ``prompt [P]`` and ``output [T]`` int32,
    ``topk_logprobs [T, L, K]`` float32 and ``topk_ids [T, L, K]`` int32, row 0 empty."""

    rid: str
    prompt: torch.Tensor
    output: torch.Tensor
    topk_logprobs: torch.Tensor
    topk_ids: torch.Tensor
    finish_reason: str

    @property
    def positions(self) -> int:
        """Recorded proposals: states ``1 .. T - 1``."""
        return max(int(self.output.shape[0]) - 1, 0)

    def validate(self) -> None:
        """Raise ValueError unless the fields have the documented shapes, dtypes and content:
        row 0 empty, rows ``1..T-1`` finite log-probs sorted descending per depth with distinct
        non-negative ids."""
        T = int(self.output.shape[0])
        lp, ids = self.topk_logprobs, self.topk_ids
        want = {"prompt": (self.prompt, torch.int32, 1), "output": (self.output, torch.int32, 1),
                "topk_logprobs": (lp, torch.float32, 3), "topk_ids": (ids, torch.int32, 3)}
        for name, (t, dtype, dim) in want.items():
            if not isinstance(t, torch.Tensor) or t.dtype != dtype or t.dim() != dim:
                raise ValueError(f"trace {self.rid}: {name} must be a {dim}-d {dtype} tensor")
        if T < 1 or self.prompt.shape[0] < 1:
            raise ValueError(f"trace {self.rid}: empty prompt or output")
        if lp.shape != ids.shape or lp.shape[0] != T or lp.shape[1] < 1 or lp.shape[2] < 1:
            raise ValueError(f"trace {self.rid}: top-K arrays {tuple(lp.shape)} / {tuple(ids.shape)} "
                             f"are not [T={T}, L, K]")
        if not (torch.isneginf(lp[0]).all() and (ids[0] == -1).all()):
            raise ValueError(f"trace {self.rid}: row 0 must be empty (-inf, -1)")
        body, body_ids = lp[1:], ids[1:]
        if not torch.isfinite(body).all():
            raise ValueError(f"trace {self.rid}: log-probs of rows 1..T-1 must be finite")
        if (body[..., 1:] > body[..., :-1]).any():
            raise ValueError(f"trace {self.rid}: log-probs are not sorted descending per depth")
        if (body_ids < 0).any():
            raise ValueError(f"trace {self.rid}: negative token ids in rows 1..T-1")
        s = body_ids.sort(-1).values
        if (s[..., 1:] == s[..., :-1]).any():
            raise ValueError(f"trace {self.rid}: repeated token ids within one depth")

    def to_dict(self) -> dict:
        return {"rid": self.rid, "finish_reason": self.finish_reason, "prompt": self.prompt, "output": self.output,
                "topk_logprobs": self.topk_logprobs, "topk_ids": self.topk_ids}


@dataclass
class TraceSet:
    """The traces of one prompt set and their metadata (docs/traces.md lists the keys)."""

    meta: Meta
    requests: List[RequestTrace]

    @property
    def positions(self) -> int:
        """Recorded proposals over all requests."""
        return sum(r.positions for r in self.requests)

    def validate(self) -> None:
        """Metadata of plain values, every request valid (:meth:`RequestTrace.validate`) with one
        ``[L, K]`` for all; ValueError otherwise."""
        if not self.requests:
            raise ValueError("trace set without requests")
        odd = {k: type(v).__name__ for k, v in self.meta.items() if type(k) is not str or type(v) not in PLAIN}
        if odd:  # (subclasses such as torch's version string do not load with weights_only)
            raise ValueError(f"trace metadata must map str to plain str/int/float/bool values: {odd}")
        shapes = {(r.depth, r.topk) for r in self.requests}
        if len(shapes) != 1:
            raise ValueError(f"trace set mixes (L, K) shapes {sorted(shapes)}")
        for r in self.requests:
            r.validate()

    def save(self, path: Union[str, Path]) -> None:
        """Validate, then write ``path`` (``torch.save``, module docstring)."""
        self.validate()
        torch.save({"format": FORMAT, "meta": dict(self.meta), "requests": [r.to_dict() for r in self.requests]},
                   str(path))

    @classmethod
    def load(cls, path: Union[str, Path], map_location=None) -> "TraceSet":
        """Read and validate a trace file (tensors onto ``map_location``); ValueError for
        another format or invalid content."""
        d = torch.load(str(path), map_location=map_location, weights_only=True)
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file")
        out = cls(meta=dict(d["meta"]), requests=[RequestTrace(**r) for r in d["requests"]])
        out.validate()
        return out
