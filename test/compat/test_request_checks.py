"""compat/request_checks.py: which requests DDTREE refuses at admission (penalties), which it
admits (structured output, logprobs), and that the hook only changes sglang's DFlash validation
on DDTREE servers."""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.compat import request_checks


def _req(**sp):
    base = dict(json_schema=None, regex=None, ebnf=None, structural_tag=None)
    base.update(sp)
    return types.SimpleNamespace(sampling_params=types.SimpleNamespace(**base))


STRUCTURED = [
    ("json_schema", '{"type": "object"}'),
    ("regex", "[ab]+"),
    ("ebnf", 'root ::= "a" | "b"'),
    ("structural_tag", '{"type": "structural_tag", "structures": [], "triggers": []}'),
]


@pytest.mark.parametrize("field,value", STRUCTURED, ids=[f for f, _ in STRUCTURED])
def test_structured_output_is_admitted(field, value):
    """DDTREE serves structured output (the grammar's mask at every tree node): sglang's own
    ``SamplingParams`` carrying each field passes admission."""
    from sglang.srt.sampling.sampling_params import SamplingParams

    req = types.SimpleNamespace(sampling_params=SamplingParams(**{field: value}))
    assert request_checks.ddtree_request_error(req) is None


@pytest.mark.parametrize("field,value", [("frequency_penalty", 0.5), ("presence_penalty", -0.3),
                                         ("repetition_penalty", 1.2)])
def test_penalties_are_refused_naming_the_field(field, value):
    from sglang.srt.sampling.sampling_params import SamplingParams

    req = types.SimpleNamespace(sampling_params=SamplingParams(**{field: value}))
    msg = request_checks.ddtree_request_error(req)
    assert msg is not None and f"{field}={value}" in msg and "would be ignored" in msg, msg
    neutral = SamplingParams(frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0)
    assert request_checks.ddtree_request_error(types.SimpleNamespace(sampling_params=neutral)) is None


def test_plain_requests_pass():
    assert request_checks.ddtree_request_error(_req()) is None


def test_hook_adds_only_on_ddtree_servers(monkeypatch):
    import sglang.srt.runtime_context as rc

    upstream = lambda req, overlap: None  # noqa: E731
    from sglang.srt.sampling.sampling_params import SamplingParams

    penalised = types.SimpleNamespace(sampling_params=SamplingParams(frequency_penalty=0.5))
    for algo, want in [("DDTREE", True), ("DFLASH", False)]:
        monkeypatch.setattr(rc, "get_server_args", lambda a=algo: types.SimpleNamespace(speculative_algorithm=a))
        got = request_checks._validate(upstream, penalised, True)
        assert (got is not None) is want
    # sglang's own refusal wins.
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm="DDTREE"))
    assert request_checks._validate(lambda req, o: "upstream says no", penalised, True) == "upstream says no"


def test_logprobs_pass_on_ddtree_only(monkeypatch):
    """sglang's own validator refuses return_logprob on DFlash-family servers; on a DDTREE server
    it is asked without it (its other checks stand) and the request keeps asking for logprobs."""
    import sglang.srt.runtime_context as rc
    from sglang.srt.speculative.dflash_utils import validate_dflash_request

    req = _req()
    req.return_logprob, req.return_hidden_states = True, False
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm="DDTREE"))
    assert request_checks._validate(validate_dflash_request, req, True) is None
    assert req.return_logprob is True
    req.return_hidden_states = True  # sglang's other refusal (hidden states under overlap) stands
    assert "return_hidden_states" in request_checks._validate(validate_dflash_request, req, True)
    assert req.return_logprob is True
    req.return_hidden_states = False
    monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm="DFLASH"))
    assert "return_logprob" in request_checks._validate(validate_dflash_request, req, True)
