"""Requests DDTREE cannot serve fail alone, at admission, with a message naming the way out.

The scheduler already asks ``validate_dflash_request`` about every request of a DFlash-family
server (DDTREE is one) and aborts the request, not the server, when it answers with a message.
DDTREE adds one case DFLASH serves: structured output (json_schema / regex / ebnf /
structural_tag), whose per-token grammar masks DDTREE's tree verify does not apply yet. Without
this check such a request would reach the verify and raise inside the scheduler. A narrow
AROUND hook on the scheduler module's reference to the validator (sglang has no per-algorithm
request-validation seam).
"""

from __future__ import annotations

from typing import Optional

from ..server_args import is_ddtree_server

_TARGET = "sglang.srt.managers.scheduler.validate_dflash_request"

STRUCTURED_FIELDS = ("json_schema", "regex", "ebnf", "structural_tag")


def ddtree_request_error(req) -> Optional[str]:
    """Why DDTREE cannot serve ``req``, or None."""
    sp = req.sampling_params
    used = [f for f in STRUCTURED_FIELDS if getattr(sp, f, None)]
    if used:
        return (
            f"DDTREE speculative decoding does not support structured output ({', '.join(used)}) yet; "
            "send it to a server with --speculative-algorithm DFLASH or without speculative decoding."
        )
    return None


def _validate(original, req, *args, **kwargs):
    msg = original(req, *args, **kwargs)
    if msg is not None:
        return msg
    return ddtree_request_error(req) if is_ddtree_server() else None


def register_request_check_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _validate, HookType.AROUND)
