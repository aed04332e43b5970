"""compat/kv_room_message.py: sglang's "no GPU memory for the KV cache" launch error on a DDTREE
server becomes one that names the verify graphs' share and what to lower (sglang's text kept);
any other error and other servers' errors pass unchanged; a planner that fits is untouched."""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.compat import kv_room_message
from sglang_ddtree.engine import verify_memory

SGLANG = ("Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.775. Raise "
          "--mem-fraction-static above 0.684 (minimum viable = 1 - available/pre = 0.6838).")


def _publish(monkeypatch, algo="DDTREE"):
    import sglang_ddtree.compat.kv_room_message as m

    sa = types.SimpleNamespace(speculative_algorithm=algo, mem_fraction_static=0.775)
    monkeypatch.setattr(m, "published_server_args", lambda: sa)
    monkeypatch.setattr(m, "published_drafter_block_size", lambda: 16)
    seen = {}

    def need(server_args, block_size):
        seen.update(server_args=server_args, block_size=block_size)
        return 5334.6, 64, [16, 17, 65]
    monkeypatch.setattr(verify_memory, "server_need", need)
    return sa, seen


def _raises(text):
    def original(self, *args, **kwargs):
        raise ValueError(text)
    return original


def test_the_planners_error_names_the_verify_graphs_share(monkeypatch):
    sa, seen = _publish(monkeypatch)
    with pytest.raises(ValueError) as e:
        kv_room_message._profile_available_bytes(_raises(SGLANG), None, 123)
    text = str(e.value)
    assert text.startswith("DDTREE: no GPU memory is left for the KV cache under --mem-fraction-static 0.775")
    for part in ("~5.2 GiB", "64 requests x verify widths [16, 17, 65]", "--max-running-requests",
                 "--speculative-ddtree-budget", "--context-length", SGLANG):
        assert part in text, part
    assert isinstance(e.value.__cause__, ValueError) and str(e.value.__cause__) == SGLANG
    assert seen == dict(server_args=sa, block_size=16)


@pytest.mark.parametrize("algo,text", [("DFLASH", SGLANG), ("DDTREE", "some other planner error")])
def test_other_errors_and_servers_pass_unchanged(monkeypatch, algo, text):
    _publish(monkeypatch, algo)
    with pytest.raises(ValueError) as e:
        kv_room_message._profile_available_bytes(_raises(text), None)
    assert str(e.value) == text


def test_a_planner_that_fits_is_untouched(monkeypatch):
    _publish(monkeypatch)
    assert kv_room_message._profile_available_bytes(lambda self, pre: pre * 2, None, 21) == 42


def test_a_need_that_cannot_be_computed_leaves_sglangs_error(monkeypatch):
    _publish(monkeypatch)

    def broken(server_args, block_size):
        raise OSError("no step-cost table")
    monkeypatch.setattr(verify_memory, "server_need", broken)
    with pytest.raises(ValueError) as e:
        kv_room_message._profile_available_bytes(_raises(SGLANG), None)
    assert str(e.value) == SGLANG
