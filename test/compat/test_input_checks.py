"""compat/input_checks.py: which input ids a model of V tokens cannot embed."""

from __future__ import annotations

import pytest

from sglang_ddtree.compat.input_checks import input_ids_error


@pytest.mark.parametrize("ids,bad", [
    ([0, 1, 99], None), ([], None),
    ([0, 100], "input_ids[1] = 100"), ([-1], "input_ids[0] = -1"), ([3, 2.0], "input_ids[1] = 2.0"),
    ([True], "input_ids[0] = True"), ([3, "7"], "input_ids[1] = '7'"),
])
def test_ids_outside_the_vocabulary_are_named(ids, bad):
    msg = input_ids_error(ids, 100)
    if bad is None:
        assert msg is None
    else:
        assert msg.startswith(bad) and "[0, 100)" in msg
