"""compat/request_checks.py: on a DDTREE server sglang's DFlash validator is asked without the
logprob flag (DDTREE serves logprobs; structured output and penalties pass it as they do for
DFLASH), its other refusals stand, and other servers see it unchanged."""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.compat import releases, request_checks


def _req(**sp):
    from sglang.srt.sampling.sampling_params import SamplingParams

    req = types.SimpleNamespace(sampling_params=SamplingParams(**sp))
    req.return_logprob, req.return_hidden_states = False, False
    return req


@pytest.fixture
def algo(monkeypatch):
    import sglang.srt.runtime_context as rc

    def use(name):
        monkeypatch.setattr(rc, "get_server_args", lambda: types.SimpleNamespace(speculative_algorithm=name))

    return use


@pytest.mark.parametrize("sp", [dict(json_schema='{"type": "object"}'), dict(regex="[ab]+"),
                                dict(ebnf='root ::= "a" | "b"'), dict(frequency_penalty=0.5),
                                dict(presence_penalty=-0.3), dict(repetition_penalty=1.2), dict(min_new_tokens=4)],
                         ids=lambda sp: next(iter(sp)))
def test_structured_output_and_penalties_are_admitted(algo, sp):
    from sglang.srt.speculative.dflash_utils import validate_dflash_request

    algo("DDTREE")
    assert request_checks._validate(validate_dflash_request, _req(**sp), True) is None


def test_logprobs_pass_on_ddtree_only(algo):
    """sglang's own validator refuses return_logprob on DFlash-family servers; on a DDTREE server
    it is asked without it (its other checks stand) and the request keeps asking for logprobs."""
    from sglang.srt.speculative.dflash_utils import validate_dflash_request

    req = _req()
    req.return_logprob = True
    algo("DDTREE")
    assert request_checks._validate(validate_dflash_request, req, True) is None
    assert req.return_logprob is True
    req.return_hidden_states = True  # sglang's other refusal (hidden states under overlap) stands
    assert "return_hidden_states" in request_checks._validate(validate_dflash_request, req, True)
    assert req.return_logprob is True
    req.return_hidden_states = False
    algo("DFLASH")
    refused = request_checks._validate(validate_dflash_request, req, True)
    if releases.RELEASE == "0.5.17":
        assert "return_logprob" in refused
    else:  # sglang 0.5.23's DFLASH serves logprobs itself
        assert refused is None
