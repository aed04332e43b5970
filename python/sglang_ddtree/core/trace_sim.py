"""Offline acceptance from drafter traces (``core/traces.py``): what the DDTREE worker would
accept on a trace, for the chain and any budget, without a model.

A request starts at state 1 (its first output token comes from the prefill, as in the engine).
At state ``p`` (committed ``prompt + output[:p]``) a step builds the draft tree from the trace's
proposal ``p`` exactly as the worker does (``core.step.draft_to_verify``: the same tree builder,
padded to the verify width ``max(budget + 1, block)``), takes as the target's greedy token at
every verify position the output token at ``p + depth`` (:func:`trace_targets`) and walks the
tree with the worker's rule (``core.accept.tree_walk``). The step accepts ``a`` drafts, commits
``min(a + 1, T - p)`` tokens (the engine trims a run at the end of the output) and moves to
``p + committed``, until the output is exhausted.

Exactness: the target token at a node is the trace's only where the node's path is the output's
(a greedy target is deterministic); the walk reads the target only at nodes of the accepted
path, whose paths are the output's, so ``a`` is exactly the engine's wherever the output goes
on past the path. A step whose accepted path reaches the end of the output (``p + a == T``)
is *censored*: the engine computed the target's token after the output's last token and may
have accepted more there (sglang counts those drafts in ``spec_correct_drafts_histogram``, then
trims the tokens); ``a`` is a lower bound and ``committed`` is exact.

Configurations (:class:`SimConfig`) are the worker's: a budget (``--speculative-ddtree-budget``),
candidates per depth (``--speculative-ddtree-topk``, at most the trace's K: the head's top-K'
is the first K' of its top-K), ``--speculative-ddtree-max-depth``; :data:`CHAIN` is DDTREE's
chain (the rank-0 candidate of every depth, budget = depth: ``DDTREE-chain`` and budget
auto's fallback), which drafts DFLASH's block argmax.

Engine-agnostic: plain torch, no sglang import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import torch

from .accept import tree_walk
from .step import draft_to_verify
from .traces import RequestTrace
from .tree_builder import DraftTree
from .verify_layout import VerifyLayout
from .widths import verify_width


@dataclass(frozen=True)
class SimConfig:
    """A DDTREE configuration: ``budget`` tree nodes (None: the chain's, the depth),
    ``topk`` candidates per depth (None: the trace's K), ``max_depth`` (None: the trace's L)."""

    budget: Optional[int] = None
    topk: Optional[int] = None
    max_depth: Optional[int] = None

    def resolve(self, L: int, K: int) -> Tuple[int, int, int]:
        """``(budget, topk, max_depth)`` on a trace of depth ``L`` and top-``K``; ValueError for
        a configuration the trace cannot answer (``topk > K``) or the worker refuses."""
        depth = L if self.max_depth is None else int(self.max_depth)
        topk = K if self.topk is None else int(self.topk)
        budget = depth if self.budget is None else int(self.budget)
        if not 1 <= depth <= L:
            raise ValueError(f"max_depth {depth} outside 1..{L}")
        if not 1 <= topk <= K:
            raise ValueError(f"topk {topk} outside 1..{K} (the trace recorded the top-{K})")
        if budget < 1:
            raise ValueError(f"budget {budget} < 1")
        return budget, topk, depth

    @property
    def label(self) -> str:
        if self == CHAIN:
            return "chain"
        parts = [f"DDTREE-{'L' if self.budget is None else self.budget}"]
        if self.topk is not None:
            parts.append(f"top{self.topk}")
        if self.max_depth is not None:
            parts.append(f"depth{self.max_depth}")
        return "/".join(parts)


CHAIN = SimConfig(budget=None, topk=1)


@dataclass
class SimResult:
    """One request's steps, in order: ``states`` p, accepted ``drafts`` (a lower bound where
    ``censored``), ``committed`` tokens (exact); ``output_len`` T."""

    output_len: int
    states: List[int] = field(default_factory=list)
    drafts: List[int] = field(default_factory=list)
    committed: List[int] = field(default_factory=list)
    censored: List[bool] = field(default_factory=list)

    @property
    def steps(self) -> int:
        """Verify steps (sglang's ``spec_verify_ct``)."""
        return len(self.states)

    @property
    def mean_accept_length(self) -> float:
        """Tokens committed per step, ``(T - 1) / steps`` (1.0 without steps)."""
        return sum(self.committed) / self.steps if self.steps else 1.0

    @property
    def spec_accept_length(self) -> float:
        """sglang's ``meta_info["spec_accept_length"]``: completion tokens per verify step,
        ``T / steps`` (the prefill's token counted)."""
        return self.output_len / self.steps if self.steps else float(self.output_len)


def trace_targets(outputs: torch.Tensor, lengths: torch.Tensor, states: torch.Tensor,
                  depth: torch.Tensor) -> torch.Tensor:
    """The target's greedy token at every verify position as a trace knows it.

    Args:
        outputs: ``[n, T_max]`` the requests' outputs (any integer dtype; padding past
            ``lengths`` is never read).
        lengths: ``[n]`` output lengths T.
        states: ``[n]`` the step's state p per request (``1 <= p < T``).
        depth: ``[n, W]`` verify positions' depths (root 0).
    Returns:
        ``[n, W]`` int64: ``outputs[p + depth]``, ``-1`` where ``p + depth >= T``. Exact at every
        node whose path is the output's (the only nodes the tree walk reads the target at).
    """
    idx = states.long().view(-1, 1) + depth.long()
    known = idx < lengths.long().view(-1, 1)
    tgt = outputs.long().gather(1, idx.clamp(max=outputs.shape[1] - 1))
    return torch.where(known, tgt, -1)


def step_trees(traces: Sequence[RequestTrace], states: Sequence[int], cfg: SimConfig
               ) -> Tuple[DraftTree, VerifyLayout, int]:
    """The draft trees the worker builds at ``states`` (one per trace), as
    ``core.step.draft_to_verify`` builds them: ``(tree [n, W - 1], layout [n, W], L)``."""
    L, K = traces[0].depth, traces[0].topk
    budget, topk, depth = cfg.resolve(L, K)
    idx = torch.tensor(list(states), dtype=torch.long)
    lp = torch.stack([t.topk_logprobs[p] for t, p in zip(traces, idx.tolist())])
    ids = torch.stack([t.topk_ids[p] for t, p in zip(traces, idx.tolist())]).long()
    root = torch.stack([t.output[p - 1] for t, p in zip(traces, idx.tolist())]).long()
    prefix = torch.tensor([int(t.prompt.shape[0]) + p - 1 for t, p in zip(traces, idx.tolist())], dtype=torch.long)
    width = verify_width(budget, L + 1)
    tree, layout = draft_to_verify(lp, ids, root, prefix, budget, width, max_siblings=topk, max_depth=depth)
    return tree, layout, L


def simulate(traces: Sequence[RequestTrace], cfg: SimConfig) -> List[SimResult]:
    """Every request of ``traces`` (one ``[L, K]``) from state 1 until its output is exhausted
    under ``cfg``; one :class:`SimResult` per trace, in order. Requests advance in lock step,
    batched like a serving batch (each request's tree depends on its own state only)."""
    traces = list(traces)
    results = [SimResult(output_len=int(t.output.shape[0])) for t in traces]
    if not traces:
        return results
    if len({(t.depth, t.topk) for t in traces}) != 1:
        raise ValueError("simulate: traces of different (L, K)")
    lengths = torch.tensor([r.output_len for r in results], dtype=torch.long)
    outputs = torch.full((len(traces), int(lengths.max())), -1, dtype=torch.long)
    for i, t in enumerate(traces):
        outputs[i, : lengths[i]] = t.output.long()
    state = [1] * len(traces)
    active = [i for i in range(len(traces)) if state[i] < lengths[i]]
    while active:
        rows = torch.tensor(active, dtype=torch.long)
        p = torch.tensor([state[i] for i in active], dtype=torch.long)
        _, layout, L = step_trees([traces[i] for i in active], p.tolist(), cfg)
        target = trace_targets(outputs[rows], lengths[rows], p, layout.depth)
        acc = tree_walk(layout.tokens, layout.parent, layout.depth, target, L)
        for j, i in enumerate(active):
            a, left = int(acc.accept_len[j]), int(lengths[i]) - state[i]
            r = results[i]
            r.states.append(state[i])
            r.drafts.append(a)
            r.committed.append(min(a + 1, left))
            r.censored.append(a == left)
            state[i] += r.committed[-1]
        active = [i for i in active if state[i] < lengths[i]]
    return results


def tokens_per_step(results: Sequence[SimResult]) -> float:
    """A set's completion tokens per verify step, ``sum T / sum steps`` (what
    ``benchmark/ddtree/accept_sweep.py`` reports from an engine's ``meta_info``)."""
    steps = sum(r.steps for r in results)
    return sum(r.output_len for r in results) / steps if steps else 1.0


def drafts_histogram(result: SimResult) -> List[int]:
    """Steps per accepted-draft count, as sglang's ``spec_correct_drafts_histogram``; a
    censored step is counted at its lower bound."""
    hist = [0] * (max(result.drafts, default=-1) + 1)
    for a in result.drafts:
        hist[a] += 1
    return hist
