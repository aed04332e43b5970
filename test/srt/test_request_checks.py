"""compat/request_checks.py: which requests DDTREE refuses at admission, and that the hook only
adds to sglang's DFlash validation on DDTREE servers."""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.compat import request_checks


def _req(**sp):
    base = dict(json_schema=None, regex=None, ebnf=None, structural_tag=None)
    base.update(sp)
    return types.SimpleNamespace(sampling_params=types.SimpleNamespace(**base))


@pytest.mark.parametrize("field", request_checks.STRUCTURED_FIELDS)
def test_structured_output_is_refused_naming_the_field(field):
    msg = request_checks.ddtree_request_error(_req(**{field: "x"}))
    assert field in msg and "DFLASH" in msg


def test_plain_requests_pass():
    assert request_checks.ddtree_request_error(_req()) is None


def test_hook_adds_only_on_ddtree_servers(monkeypatch):
    import sglang.srt.runtime_context as rc

    upstream = lambda req, overlap: None  # noqa: E731
    for algo, want in [("DDTREE", True), ("DFLASH", False)]:
        monkeypatch.setattr(rc, "get_server_args", lambda a=algo: types.SimpleNamespace(speculative_algorithm=a))
        got = request_checks._validate(upstream, _req(regex="a+"), True)
        assert (got is not None) is want
    # sglang's own refusal wins.
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm="DDTREE"))
    assert request_checks._validate(lambda req, o: "upstream says no", _req(regex="a+"), True) == "upstream says no"
