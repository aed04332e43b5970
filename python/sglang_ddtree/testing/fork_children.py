"""Test-only: CPU test engines start their scheduler and detokenizer by fork.

sglang 0.5.17 starts an engine's children by spawn (``engine._set_envs_and_config`` sets the
start method), so each child imports sglang again: about 7 s of CPU per child on the 2-core CI
machine, two children per engine, some forty engines in the CPU suite. With
``SGLANG_DDTREE_TEST_FORK_CHILDREN=1`` the hook below switches the start method to fork after
sglang set it, so the children begin with the launcher's modules already imported.

What a forked child inherits instead of doing itself: the plugin's registration
(``sglang.srt.plugins._plugins_loaded`` and our ``plugin._registered`` are already true, the
hooks already applied). That is equivalent only while the test plugin this process registered
is the one the current environment would register, so the switch applies when

- the engine runs on CPU (a process that may have touched CUDA must not fork),
- this process runs one OpenMP thread (``OMP_NUM_THREADS=1`` and torch at one thread, as
  ``scripts/run_tests.sh`` sets): a child forked beside a GNU OpenMP thread team waits forever at
  its first parallel region's barrier for team threads that fork did not copy,
- :func:`signature` now equals its value when this process registered the test plugin (the
  variables whose hooks are installed once, at registration; the oracle drafter, the pool counts
  and the no-mask control read their variables on every call instead, see ``plugin.py``),
- ``SGLANG_DDTREE_PLUGIN_MARKER`` is unset (its test proves ``register()`` runs in spawned
  children).

Otherwise the engine keeps spawn. The serving path users run (spawn) stays covered by the HTTP
server tests that leave this variable unset, the plugin-marker test and the installed-wheel test.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from typing import Optional, Tuple

from ..config import BENCH_REPLAY, PLUGIN_MARKER, TEST_EXTRA_BUFFER_ARCHS, TEST_FP32_NORMS, TEST_RECORD_TRACE

logger = logging.getLogger(__name__)

_registered_with: Optional[Tuple] = None


def signature() -> Tuple:
    """The values of the test variables whose hooks are installed once, at registration."""
    return tuple((v.name, v.get()) for v in (TEST_RECORD_TRACE, BENCH_REPLAY, TEST_EXTRA_BUFFER_ARCHS, TEST_FP32_NORMS))


def note_registration() -> None:
    """Called by the test plugin's ``register()``: what this process registered."""
    global _registered_with
    _registered_with = signature()


def fork_decision(server_args) -> Tuple[bool, str]:
    """``(fork, why)`` for an engine about to start its children."""
    if str(getattr(server_args, "device", "")) != "cpu":
        return False, f"device {server_args.device!r} is not cpu"
    if os.environ.get("OMP_NUM_THREADS") != "1":
        return False, "OMP_NUM_THREADS is not 1 (an OpenMP thread team does not survive fork)"
    import torch

    if torch.get_num_threads() != 1:
        return False, f"torch runs {torch.get_num_threads()} threads (an OpenMP thread team does not survive fork)"
    if PLUGIN_MARKER.is_set():
        return False, f"{PLUGIN_MARKER.name} is set"
    if _registered_with is None:
        return False, "the test plugin was not registered in this process"
    if signature() != _registered_with:
        return False, "the test plugin registered here differs from what the environment asks for"
    return True, "fork"


def after_set_envs_and_config(result, server_args, *args, **kwargs):
    """AFTER ``sglang.srt.entrypoints.engine._set_envs_and_config`` (which sets spawn)."""
    fork, why = fork_decision(server_args)
    if fork:
        multiprocessing.set_start_method("fork", force=True)
    else:
        logger.info("sglang-ddtree TEST: engine children start by spawn (%s)", why)
    return result
