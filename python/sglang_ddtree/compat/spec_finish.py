"""Finish conditions for speculative steps that commit several tokens at once.

sglang 0.5.17's ``Req.update_finish_state(new_accepted_len)`` checks max_new_tokens first and
returns, so when one speculative step both reaches the token budget and contains a stop
string or stop token earlier in its accepted run, the request finishes by length and the
tokens past the stop are emitted: the output differs from decoding without speculation
(seen with DDTREE, which accepts up to 16 tokens a step; DFLASH has the same exposure). The
hook applies, for multi-token steps, what token-by-token decoding would do: the earliest of
the stop-string match, the stop-token match and the length cap wins (at equal positions in
the order upstream checks a single token: length, stop string, stop token). Single-token
steps and everything else go to upstream unchanged.
"""

from __future__ import annotations

_TARGET = "sglang.srt.managers.schedule_batch.Req.update_finish_state"


def _earliest_finish(original, self, new_accepted_len: int = 1):
    if new_accepted_len <= 1 or self.finished() or self.to_finish:
        return original(self, new_accepted_len)
    from sglang.srt.managers.schedule_batch import FINISH_LENGTH

    n = len(self.output_ids)
    new_tokens = self.output_ids[-new_accepted_len:]
    if self._check_vocab_boundary_finish(new_tokens):
        return None
    found = []  # (finish length, priority, reason)
    if self._check_str_based_finish(new_accepted_len):
        found.append((self.finished_len or n, 1, self.finished_reason))
        self.finished_reason, self.finished_len = None, None
    if self._check_token_based_finish(new_tokens):
        found.append((self.finished_len or n, 2, self.finished_reason))
        self.finished_reason, self.finished_len = None, None
    cap = self.sampling_params.max_new_tokens
    if n >= cap:
        found.append((cap, 0, FINISH_LENGTH(length=cap)))
    if not found:
        return original(self, new_accepted_len)
    finished_len, _, reason = min(found, key=lambda f: (f[0], f[1]))
    self.finished_reason, self.finished_len = reason, finished_len
    return None


def register_spec_finish_hook() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(_TARGET, _earliest_finish, HookType.AROUND)
