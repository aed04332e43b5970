"""Test/benchmark-only recording mode of the DDTREE worker: drafter traces (``core/traces.py``,
docs/traces.md) from a real engine.

Activated by ``SGLANG_DDTREE_TEST_RECORD_TRACE=<directory>`` (the test plugin,
``testing/plugin.py``, installs the hooks below in the scheduler process; no product flag reaches
them). In this mode every DDTREE decode step commits only its bonus token: the tree is drafted
and verified as usual, but the walk sees every non-root node with token -1, so it accepts no
draft and commits the target's token at the root, the target's own greedy token. Every output
position is therefore a step start, and the drafter's per-depth top-K of the step at state
``p`` (committed ``prompt + output[:p]``) is its proposal there. Each step writes one file into
the directory, ``step-<pid>-<seq>.pt`` (``torch.save``)::

    {"rid": [bs] str, "state": int64 [bs], "root": int64 [bs], "committed": int64 [bs],
     "topk_logprobs": float32 [bs, L, K], "topk_ids": int32 [bs, L, K]}

``state`` is ``p`` (from the committed KV length: ``prefix - prompt + 1``), ``root`` the block's
root token (``output[p - 1]``), ``committed`` the token the step committed (``output[p]``).
:func:`read_steps` and :func:`assemble` turn the files and the engine's outputs into traces.

Refused: overlap scheduling (the worker refuses to start: the mode is verified without it
only), the oracle drafter at the same time (at plugin registration), and sampled requests (the
step fails). Cost: one drafter block and one target verify of the full verify width per output
token, against one target decode token without speculation, plus one host read and one file
per step.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch

from ..config import TEST_RECORD_TRACE
from ..core.traces import RequestTrace

# rid -> state p -> (root, committed, lp [L, K], ids [L, K])
Steps = Dict[str, Dict[int, Tuple[int, int, torch.Tensor, torch.Tensor]]]

_seq = itertools.count()


def refuse_overlap(result, self, *args, **kwargs):
    """AFTER ``DDTreeWorker.__init__``: the mode runs without overlap scheduling only."""
    if not self.server_args.disable_overlap_schedule:
        raise RuntimeError(f"DDTREE trace recording ({TEST_RECORD_TRACE.name}) needs --disable-overlap-schedule")
    return result


def record_draft(original, self, batch, draft_input, window, prefix_lens, *args, **kwargs):
    """AROUND ``DDTreeWorker.draft``: the step's top-K and states, kept for :func:`write_step`."""
    lp, ids = original(self, batch, draft_input, window, prefix_lens, *args, **kwargs)
    info = batch.sampling_info
    if info is not None and not info.is_all_greedy:
        raise RuntimeError("DDTREE trace recording: greedy requests only (temperature 0)")
    prompt_lens = torch.tensor([len(r.origin_input_ids) for r in batch.reqs], dtype=torch.int64)
    self._trace_step = {
        "rid": [str(r.rid) for r in batch.reqs],
        "state": prefix_lens.long().cpu() - prompt_lens + 1,
        "root": draft_input.bonus_tokens.long().cpu(),
        "topk_logprobs": lp.float().cpu(),
        "topk_ids": ids.to(torch.int32).cpu(),
    }
    return lp, ids


def bonus_only(original, layout, target, max_depth, window, *args, **kwargs):
    """AROUND ``core.step.verify_to_commit``: the walk sees no draft token (every non-root
    position's token -1, which no target token equals), so it commits the root's bonus only."""
    pos = torch.arange(layout.tokens.shape[1], device=layout.tokens.device)
    blind = dataclasses.replace(layout, tokens=torch.where(pos == 0, layout.tokens, -1))
    return original(blind, target, max_depth, window, *args, **kwargs)


def write_step(result, self, batch, *args, **kwargs):
    """AFTER ``DDTreeWorker._decode_step``: the committed tokens joined to the step's record,
    written to the recording directory (tensor-parallel rank 0 only)."""
    step = self.__dict__.pop("_trace_step", None)
    if step is None:
        raise RuntimeError("DDTREE trace recording: a decode step without a recorded draft")
    lens = result.accept_lens.cpu()
    if not bool((lens == 1).all()):
        raise RuntimeError(f"DDTREE trace recording: a step committed {lens.tolist()} tokens, not 1 each")
    bs = len(step["rid"])
    step["committed"] = result.next_token_ids.view(bs, -1)[:, 0].long().cpu()
    from sglang.srt.distributed import get_tp_group

    if get_tp_group().rank_in_group == 0:
        out = Path(TEST_RECORD_TRACE.get())
        out.mkdir(parents=True, exist_ok=True)
        torch.save(step, out / f"step-{os.getpid()}-{next(_seq):08d}.pt")
    return result


def read_steps(directory) -> Steps:
    """Every step file of ``directory``, by request and state; ValueError for a state recorded
    twice for one request."""
    steps: Steps = {}
    for path in sorted(Path(directory).glob("step-*.pt")):
        s = torch.load(path, weights_only=True)
        for b, rid in enumerate(s["rid"]):
            p = int(s["state"][b])
            mine = steps.setdefault(rid, {})
            if p in mine:
                raise ValueError(f"request {rid}: state {p} recorded twice")
            mine[p] = (int(s["root"][b]), int(s["committed"][b]), s["topk_logprobs"][b], s["topk_ids"][b])
    return steps


def assemble(steps: Steps, rid: str, prompt: Sequence[int], output: Sequence[int],
             finish_reason: str) -> RequestTrace:
    """The trace of request ``rid`` (its ``prompt`` and the engine's ``output``, T tokens) from
    its recorded steps: row ``p`` from the step at state ``p`` for ``p = 1..T-1``, row 0 empty.
    ValueError unless exactly those states were recorded, each with root ``output[p - 1]`` and
    committed token ``output[p]``."""
    mine = steps.get(rid, {})
    T = len(output)
    if sorted(mine) != list(range(1, T)):
        raise ValueError(f"request {rid}: recorded states {sorted(mine)[:5]}... are not 1..{T - 1}")
    if T == 1:
        raise ValueError(f"request {rid}: one output token, nothing drafted; ask for more new tokens")
    L, K = mine[1][2].shape
    lp = torch.full((T, L, K), float("-inf"), dtype=torch.float32)
    ids = torch.full((T, L, K), -1, dtype=torch.int32)
    for p, (root, committed, step_lp, step_ids) in mine.items():
        if root != output[p - 1] or committed != output[p]:
            raise ValueError(f"request {rid}, state {p}: root {root} / committed {committed}, output has "
                             f"{output[p - 1]} / {output[p]}")
        lp[p], ids[p] = step_lp, step_ids
    trace = RequestTrace(rid=rid, prompt=torch.tensor(list(prompt), dtype=torch.int32),
                         output=torch.tensor(list(output), dtype=torch.int32), topk_logprobs=lp, topk_ids=ids,
                         finish_reason=finish_reason)
    trace.validate()
    return trace


def assemble_all(steps: Steps, outs: List[dict], prompts: Sequence[Sequence[int]]) -> List[RequestTrace]:
    """One trace per engine output (``sglang.Engine.generate`` results, in prompt order: ``meta_info``
    ``id`` and ``finish_reason``, ``output_ids``)."""
    traces = []
    for o, prompt in zip(outs, prompts):
        reason = o["meta_info"].get("finish_reason") or {}
        traces.append(assemble(steps, str(o["meta_info"]["id"]), prompt, o["output_ids"],
                               str(reason.get("type", "")) if isinstance(reason, dict) else str(reason)))
    return traces
