"""Token ids the model cannot embed fail alone, at admission, with a 400.

sglang 0.5.17's ``TokenizerManager`` defines ``_validate_input_ids_in_vocab`` but never calls it:
a request whose ``input_ids`` hold a negative or out-of-vocabulary id (or a non-integer) reaches
the scheduler, where the embedding lookup raises and the scheduler process dies, taking every
other request down (with or without speculation). On a DDTREE server a narrow AROUND hook on
``TokenizerManager._validate_one_request`` (the per-request admission check, in the server
process, before anything is sent to the scheduler) raises ``ValueError`` naming the first bad
id; sglang's endpoints answer a ``ValueError`` there with HTTP 400.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..server_args import is_ddtree

_TARGET = "sglang.srt.managers.tokenizer_manager.TokenizerManager._validate_one_request"


def input_ids_error(input_ids: Sequence, vocab_size: int) -> Optional[str]:
    """Why ``input_ids`` cannot be served by a model of ``vocab_size`` tokens, or None."""
    for i, t in enumerate(input_ids):
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab_size:
            return (f"input_ids[{i}] = {t!r} is not a token id of this model: token ids are integers in "
                    f"[0, {vocab_size}).")
    return None


def _validate(original, self, obj, input_ids, *args, **kwargs):
    out = original(self, obj, input_ids, *args, **kwargs)
    if input_ids is not None and is_ddtree(self.server_args):
        msg = input_ids_error(input_ids, int(self.model_config.vocab_size))
        if msg is not None:
            raise ValueError(msg)
    return out


def register_input_check_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _validate, HookType.AROUND)
