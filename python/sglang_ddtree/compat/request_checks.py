"""Requests a DDTREE server admits that sglang's DFLASH validation refuses: ``return_logprob``.

The scheduler asks ``validate_dflash_request`` about every request of a DFlash-family server
(DDTREE is one) and aborts the request when it answers with a message; DFLASH refuses logprobs
there. DDTREE serves them (``verify_info.output_logprobs``), and structured output and penalties
(``verify_info.apply_grammar``, ``engine.penalty_state``), so on a DDTREE server the validator is
asked without the logprob flag and its other checks stand. A narrow AROUND hook on the scheduler
module's reference to the validator (sglang has no per-algorithm request-validation seam).
"""

from __future__ import annotations

from ..server_args import is_ddtree_server

_TARGET = "sglang.srt.managers.scheduler.validate_dflash_request"


def _validate(original, req, *args, **kwargs):
    if not is_ddtree_server():
        return original(req, *args, **kwargs)
    asked = getattr(req, "return_logprob", False)
    req.return_logprob = False  # DDTREE serves logprobs: DFLASH's other checks only
    try:
        msg = original(req, *args, **kwargs)
    finally:
        req.return_logprob = asked
    return msg


def register_request_check_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _validate, HookType.AROUND)
