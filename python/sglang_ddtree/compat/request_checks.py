"""Requests DDTREE cannot serve fail alone, at admission, with a message naming the way out.

The scheduler already asks ``validate_dflash_request`` about every request of a DFlash-family
server (DDTREE is one) and aborts the request, not the server, when it answers with a message.
DDTREE serves ``return_logprob``, which DFLASH refuses there, and refuses what DFLASH admits but
would serve differently: frequency, presence and repetition penalties (sglang 0.5.17 counts one
output token per speculative step, ``ScheduleBatch.cumulate_penalty_output_tokens``, and its
DFlash verify adjustment cannot scale a penalty it adds to zeros, so the request would be served
as if it had no penalty: a different output with no error). Structured output is served (the
grammar's mask at every tree node, ``verify_info.apply_grammar``).

A narrow AROUND hook on the scheduler module's reference to the validator (sglang has no
per-algorithm request-validation seam).
"""

from __future__ import annotations

from typing import Optional

from ..server_args import is_ddtree_server

_TARGET = "sglang.srt.managers.scheduler.validate_dflash_request"

# Sampling-parameter fields of a penalty and their neutral value.
PENALTY_FIELDS = (("frequency_penalty", 0.0), ("presence_penalty", 0.0), ("repetition_penalty", 1.0))


def ddtree_request_error(req) -> Optional[str]:
    """Why DDTREE cannot serve ``req``, or None."""
    sp = req.sampling_params
    penalties = [f"{f}={getattr(sp, f)}" for f, neutral in PENALTY_FIELDS
                 if getattr(sp, f, neutral) not in (None, neutral)]
    if penalties:
        return (
            f"DDTREE speculative decoding does not apply {', '.join(penalties)} yet (it would be ignored); "
            "send the request without it, or to a server without speculative decoding."
        )
    return None


def _validate(original, req, *args, **kwargs):
    if not is_ddtree_server():
        return original(req, *args, **kwargs)
    asked = getattr(req, "return_logprob", False)
    req.return_logprob = False  # DDTREE serves logprobs: DFLASH's other checks only
    try:
        msg = original(req, *args, **kwargs)
    finally:
        req.return_logprob = asked
    return msg if msg is not None else ddtree_request_error(req)


def register_request_check_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _validate, HookType.AROUND)
