"""debug_log.py's PhaseEvents without a GPU: completed steps are folded into per-phase sums (the
step's span outside its phases as "other", the device time between steps as "gap", beside each
the host time that issued it), a step still in flight is left for later, and nothing is waited for
until a snapshot asks. SyncWatch attributes host synchronisations to the code that made them."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.debug_log import PhaseEvents, SyncWatch


class _Event:
    """A stand-in for torch.cuda.Event on a fake device clock (ms)."""

    def __init__(self, t, done=True):
        self.t, self.done, self.waited = t, done, False

    def query(self):
        return self.done

    def synchronize(self):
        self.waited = True
        self.done = True

    def elapsed_time(self, end):
        return end.t - self.t


def _step(t0, phases, t1, done=True, host_gap=None):
    """A step's events; each phase's host time is a tenth of its device time, the step's 3 ms."""
    ev = [("step", _Event(t0), _Event(t1, done), 3.0, host_gap)]
    t = t0 + 0.5
    for name, ms in phases:
        ev.append((name, _Event(t), _Event(t + ms), ms / 10))
        t += ms
    return ev


def test_completed_steps_are_folded_and_the_step_in_flight_waits():
    pe = PhaseEvents()
    pe.pending.extend([_step(0.0, [("draft", 2.0), ("verify", 10.0)], 14.0),
                       _step(15.0, [("draft", 2.0), ("verify", 11.0)], 30.0, done=False, host_gap=0.7)])
    pe._fold(wait=False)
    assert pe.steps == 1 and pe.ms_sum == {"draft": 2.0, "verify": 10.0, "other": 2.0, "host_draft": 0.2,
                                           "host_verify": 1.0, "host_step": 3.0}
    assert not pe.pending[0][0][2].waited  # not waited for on the decode path
    snap = pe.snapshot()  # a read waits
    assert snap["steps"] == 2 and snap["ms_sum"]["gap"] == 1.0 and snap["ms_sum"]["verify"] == 21.0
    assert snap["ms_per_step"]["other"] == 2.0 and snap["ms_per_step"]["draft"] == 2.0
    assert snap["ms_sum"]["host_gap"] == 0.7 and snap["ms_per_step"]["host_step"] == 3.0


def test_a_step_without_its_end_event_is_never_folded():
    pe = PhaseEvents()
    pe.pending.append([("step", _Event(0.0), None, 0.0, None)])
    assert pe.snapshot() == {"steps": 0, "ms_sum": {}, "ms_per_step": {}}
    assert len(pe.pending) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_sync_watch_names_the_line_that_synchronised_and_nothing_else():
    w = SyncWatch()
    x = torch.ones(8, device="cuda")
    with w.watch():
        y = (x * 2).sum()  # asynchronous
        assert not w.sites
        value = y.item()  # synchronises: this line
    assert value == 16.0
    (site, n), = w.sites.items()
    assert site.startswith(__file__) and n == 1 and "test_sync_watch" in site
    assert torch.cuda.get_sync_debug_mode() == 0  # restored
