"""testing/fork_children.py: when CPU test engines fork their children, and when they keep spawn."""

from __future__ import annotations

import multiprocessing
from types import SimpleNamespace

import pytest

from sglang_ddtree.testing import fork_children


@pytest.fixture
def registered(monkeypatch):
    for name in ("SGLANG_DDTREE_TEST_RECORD_TRACE", "SGLANG_DDTREE_BENCH_REPLAY",
                 "SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS", "SGLANG_DDTREE_PLUGIN_MARKER"):
        monkeypatch.delenv(name, raising=False)
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setattr(fork_children, "_registered_with", None)
    fork_children.note_registration()
    yield monkeypatch
    torch.set_num_threads(threads)
    multiprocessing.set_start_method("spawn", force=True)


CPU = SimpleNamespace(device="cpu")


def test_cpu_engine_forks_when_the_registration_matches(registered):
    assert fork_children.fork_decision(CPU) == (True, "fork")
    multiprocessing.set_start_method("spawn", force=True)
    fork_children.after_set_envs_and_config(None, CPU)
    assert multiprocessing.get_start_method() == "fork"


@pytest.mark.parametrize("device", ["cuda", "xpu", None])
def test_only_cpu_engines_fork(registered, device):
    fork, why = fork_children.fork_decision(SimpleNamespace(device=device))
    assert not fork and "not cpu" in why
    multiprocessing.set_start_method("spawn", force=True)
    fork_children.after_set_envs_and_config(None, SimpleNamespace(device=device))
    assert multiprocessing.get_start_method() == "spawn"


def test_the_plugin_marker_keeps_spawn(registered, tmp_path):
    registered.setenv("SGLANG_DDTREE_PLUGIN_MARKER", str(tmp_path / "m"))
    fork, why = fork_children.fork_decision(CPU)
    assert not fork and "PLUGIN_MARKER" in why


@pytest.mark.parametrize("name", ["SGLANG_DDTREE_TEST_RECORD_TRACE", "SGLANG_DDTREE_BENCH_REPLAY",
                                  "SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS"])
def test_a_test_plugin_other_than_the_registered_one_keeps_spawn(registered, tmp_path, name):
    """A variable whose hooks are installed at registration, set now but not then: a forked child
    would inherit the hooks of the registration, not these."""
    registered.setenv(name, str(tmp_path / "x"))
    fork, why = fork_children.fork_decision(CPU)
    assert not fork and "differs" in why
    fork_children.note_registration()  # registered with it: forks again
    assert fork_children.fork_decision(CPU)[0]


def test_no_registration_keeps_spawn(registered):
    registered.setattr(fork_children, "_registered_with", None)
    assert fork_children.fork_decision(CPU) == (False, "the test plugin was not registered in this process")


def test_an_openmp_thread_team_keeps_spawn(registered):
    """A child forked beside a GNU OpenMP team deadlocks at its first parallel region."""
    import torch

    registered.delenv("OMP_NUM_THREADS")
    fork, why = fork_children.fork_decision(CPU)
    assert not fork and "OMP_NUM_THREADS" in why
    registered.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(2)
    fork, why = fork_children.fork_decision(CPU)
    assert not fork and "torch runs 2 threads" in why
