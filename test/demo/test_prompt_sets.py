"""``sglang_ddtree.demo.prompt_sets`` ranges and the drafter trainer's prompt list built from them
(the sets themselves live in PyPI wheels of requirements/bench-data.txt, not installed in CI:
the loaders are stand-ins here)."""

from __future__ import annotations

import argparse

import pytest

from sglang_ddtree.demo import prompt_sets
from sglang_ddtree.demo.train_dflash import training_prompts


def test_parse_spec():
    assert prompt_sets.parse_spec("gsm8k") == ("gsm8k", 0, None)
    assert prompt_sets.parse_spec("gsm8k:40") == ("gsm8k", 40, None)
    assert prompt_sets.parse_spec("gsm8k:40:400") == ("gsm8k", 40, 400)
    assert prompt_sets.parse_spec("sharegpt::7") == ("sharegpt", 0, 7)
    for bad in ("nope:1:2", "gsm8k:5:5", "gsm8k:1:2:3", "gsm8k:-1"):
        with pytest.raises(ValueError, match="prompt set spec"):
            prompt_sets.parse_spec(bad)


@pytest.fixture
def fake_sets(monkeypatch):
    sizes = {"humaneval": 5, "mt_bench": 3, "gsm8k": 9, "sharegpt": 1000}
    for name, size in sizes.items():
        monkeypatch.setitem(prompt_sets.SETS, name,
                            lambda n, name=name, size=size: [f"{name}{i}" for i in range(min(n, size))])
    monkeypatch.setattr(prompt_sets, "humaneval", prompt_sets.SETS["humaneval"])


def test_ranges_and_their_interleaving(fake_sets):
    assert prompt_sets.prompts_of("gsm8k:7") == ["gsm8k7", "gsm8k8"]
    assert prompt_sets.prompts_of("mt_bench:1:2") == ["mt_bench1"]
    with pytest.raises(ValueError, match="sharegpt needs a STOP"):
        prompt_sets.prompts_of("sharegpt:3")
    a = argparse.Namespace(prompt_sets=["humaneval:3", "gsm8k:0:2", "sharegpt:10:11"], num_prompts=0)
    assert training_prompts(a) == ["humaneval3", "gsm8k0", "sharegpt10", "humaneval4", "gsm8k1"]
    assert training_prompts(argparse.Namespace(prompt_sets=None, num_prompts=2)) == ["humaneval0", "humaneval1"]
