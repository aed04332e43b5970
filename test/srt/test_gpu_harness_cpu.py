"""CPU checks of the GPU-suite helpers: the near-tie comparison (test/srt/gpu_cases.py) and the
placeholder modules that let EAGLE draft graphs capture on a trimmed host
(sglang_ddtree/compat/trimmed_bundle.py)."""

from __future__ import annotations

import sys

import pytest

import gpu_cases
from sglang_ddtree.compat import trimmed_bundle


def _top2(pairs):
    return [[(a, i, None), (b, j, None)] for (a, i), (b, j) in pairs]


def test_compare_equal_and_prefix():
    top = _top2([((-0.1, 5), (-3.0, 6))] * 4)
    assert gpu_cases.compare_to_reference([5, 5, 5], [5, 5, 5], top) == {"compared": 3, "equal": True, "near_tie": None}
    assert gpu_cases.compare_to_reference([5, 5], [5, 5, 5], top)["equal"] is False  # too short


def test_compare_accepts_only_a_real_near_tie():
    top = _top2([((-0.1, 5), (-3.0, 6)), ((-0.70, 7), (-0.72, 8)), ((-0.1, 5), (-3.0, 6))])
    c = gpu_cases.compare_to_reference([5, 8, 1], [5, 7, 5], top)
    assert c["compared"] == 1 and c["near_tie"]["ok"] and c["near_tie"]["gap"] == pytest.approx(0.02)
    # Same position, but a token outside the top 2: a real mismatch.
    assert not gpu_cases.compare_to_reference([5, 9, 1], [5, 7, 5], top)["near_tie"]["ok"]
    # A clear winner (gap 2.9 > tol) chosen differently: a real mismatch.
    assert not gpu_cases.compare_to_reference([6, 7, 5], [5, 7, 5], top)["near_tie"]["ok"]


def test_placeholders_only_for_modules_that_fail(monkeypatch):
    missing = "sglang_ddtree_test_no_such_backend"
    monkeypatch.setattr(trimmed_bundle, "ISINSTANCE_ONLY", {missing: ("SomeBackend",), "json": ("JSONDecoder",)})
    import json

    with trimmed_bundle.placeholders_for_missing_backends() as added:
        assert added == [missing]
        from sglang_ddtree_test_no_such_backend import SomeBackend  # noqa: F401  (importable now)

        assert not isinstance(object(), SomeBackend)
        with pytest.raises(ImportError, match="unavailable"):
            sys.modules[missing].other_function  # noqa: B018
        assert sys.modules["json"] is json  # a module that imports is left alone
    assert missing not in sys.modules
