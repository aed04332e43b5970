"""Test-only: let sglang's mamba ``extra_buffer`` prefix-cache strategy serve more architectures.

sglang 0.5.17 decides by architecture name whether a hybrid model may use the extra-buffer
strategy, the one that tracks linear-attention states during decode for the radix cache
(``arg_groups/overrides.py::_MAMBA_EXTRA_BUFFER_ARCHS``, read by
``supports_mamba_cache_extra_buffer``), and by a second architecture set whether the hybrid
radix-cache resolution runs at all (``_MAMBA_RADIX_CACHE_ARCHS``, read by
``_mamba_radix_cache_resolution``). Our tiny hybrid target loads as the text-only
``Qwen3_5ForCausalLM``, which is in neither (the real Qwen3.6 checkpoints load as
``Qwen3_5ForConditionalGeneration``, which is in both), so on it the strategy stays unresolved
(``auto``, read as no extra buffer) and the state-tracking paths never run; adding the name to
the first set alone changes nothing. Setting ``SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS`` (comma-separated
architecture names) adds those names to both sets in every sglang process (the test plugin
runs in each, before ``ServerArgs`` is built), for the GPU test cases that exercise tracking. Unset in production: nothing changes.

There is no seam for this in sglang; the two module attributes are replaced, narrowly and only
when the variable is set.
"""

from __future__ import annotations

from ..config import TEST_EXTRA_BUFFER_ARCHS

ENV = TEST_EXTRA_BUFFER_ARCHS.name


def apply_extra_buffer_archs() -> list:
    """Add the architectures named by ``ENV`` to sglang's hybrid radix-cache and extra-buffer
    architecture sets; returns the names."""
    names = [n.strip() for n in (TEST_EXTRA_BUFFER_ARCHS.get() or "").split(",") if n.strip()]
    if names:
        import sglang.srt.arg_groups.overrides as overrides

        overrides._MAMBA_RADIX_CACHE_ARCHS = frozenset(overrides._MAMBA_RADIX_CACHE_ARCHS) | frozenset(names)
        overrides._MAMBA_EXTRA_BUFFER_ARCHS = frozenset(overrides._MAMBA_EXTRA_BUFFER_ARCHS) | frozenset(names)
    return names
