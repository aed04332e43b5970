"""Benchmark-only replay drafter: an engine on dummy weights accepts, step for step, what a
recorded drafter/target pair accepted (a drafter trace, docs/traces.md), while the draft forward,
the target's verify forward and the commits still run at full size.

Activated by ``SGLANG_DDTREE_BENCH_REPLAY=<trace file>`` (the test plugin, ``testing/plugin.py``,
installs the hooks below in every scheduler process; no flag reaches them). The lookup math is
``core/trace_replay.py``; here it is wired into sglang:

- **Refusal.** The target worker refuses to start unless target and drafter load dummy weights
  (``load_format="dummy"``) or are tiny test models under ``build/tiny``: a replayed engine's
  outputs are the trace's, not a real checkpoint's (:func:`refuse_real_weights`).
- **Requests.** A request whose prompt token ids (the recorder's, chat template applied) are not
  a trace request's is aborted alone, with a message naming the switch, by the scheduler's
  DFlash-family request validation (:func:`check_prompt`; DDTREE and DFLASH servers). At every
  prefill the batch's requests are matched to trace requests by prompt into a device table by
  request-pool slot (:meth:`Replay.bind`; it fails the step on an unknown prompt that was not
  aborted, as on a server without speculation, whose decode logits are replaced too). Every
  decode step derives each request's state on the device from its committed length.
- **Target** (:func:`replace_target_logits`, AFTER ``ModelRunner.forward``). The narrowest place
  serving DDTREE's tree verify, DFLASH's chain verify and both prefills: the target runner's
  logits, once its forward (CUDA graph or eager) has run at full size. Each logits row becomes
  0 at the trace's token after that row's sequence position and -1e4 elsewhere, so whatever
  picks the token afterwards (sglang's sampler after a prefill, DDTREE's tree walk, DFLASH's
  argmax and accept) picks the trace's: ``output[p + depth]`` at a verify position of depth
  ``depth`` from state ``p``, ``output[0]`` after the prefill, the table's filler token (which
  no proposal carries) past the output. The drafter's runner is left alone.
- **DDTREE draft** (AROUND ``DDTreeWorker.draft``): the drafter forward and its top-K head run,
  then the result is replaced by the trace's rows ``[bs, L, topk]`` at each request's state.
- **DFLASH draft** (BEFORE ``DFlashVerifyInput.prepare_for_verify``): the drafter forward and its
  argmax ran; the verify input's draft tokens (a view of the block DFLASH accepts against) are
  overwritten in place with the trace's chain, ``topk_ids[p, :, 0]``.

No host synchronisation in a decode step: the slot table is written at prefill; per step every
replacement is a fixed-shape gather / scatter on the device. Use plain greedy requests of at
most the trace's output length (:func:`replay_requests`); logit bias, penalties and grammars
change the logits after the replacement and are not part of a replay.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import torch

from ..compat import releases
from ..config import BENCH_REPLAY
from ..core.trace_replay import ReplayTable, onehot_logits_
from ..core.traces import TraceSet

logger = logging.getLogger(__name__)

_active: Optional["Replay"] = None


def _load_format(fmt) -> str:
    return str(getattr(fmt, "value", fmt) or "auto").lower()


def _tiny(path) -> bool:
    from .tiny_models import build_dir

    try:
        return Path(path).resolve().is_relative_to(build_dir().resolve())
    except (TypeError, OSError):
        return False


def refuse_real_weights(server_args) -> None:
    """RuntimeError naming the switch unless the target and the drafter (if any) load dummy
    weights (``load_format="dummy"``; the drafter's ``--speculative-draft-load-format``, by default
    the target's) or are tiny test models under ``build/tiny``."""
    target_fmt = _load_format(server_args.load_format)
    models = [("target", server_args.model_path, target_fmt)]
    drafter = getattr(server_args, "speculative_draft_model_path", None)
    if drafter:
        fmt = getattr(server_args, "speculative_draft_load_format", None)
        models.append(("drafter", drafter, _load_format(fmt) if fmt else target_fmt))
    real = [f"{role} {path} (load_format {fmt})" for role, path, fmt in models if fmt != "dummy" and not _tiny(path)]
    if real:
        raise RuntimeError(f"{BENCH_REPLAY.name} replays a drafter trace on dummy weights only "
                           f"(load_format='dummy', or the tiny test models under build/tiny); this engine loads "
                           f"real weights: {', '.join(real)}. Unset {BENCH_REPLAY.name} or load dummy weights.")


def _finished(req) -> bool:
    """Whether ``req`` is finished or set to finish (an abort: ``Req.set_finish_with_abort``)."""
    if getattr(req, "to_finish", None) is not None:
        return True
    done = getattr(req, "finished", None)
    return bool(done()) if callable(done) else False


def _missing_prompt(rids, path) -> str:
    return (f"{BENCH_REPLAY.name}: request(s) {list(rids)[:5]} have a prompt that the trace {path} does not hold; "
            "a replayed engine serves the trace's prompts only (their token ids as recorded, chat template applied)")


class Replay:
    """One scheduler process's replay: the trace table on the target's device and the
    request-pool slot -> trace request table (``slot_req [pool]`` int64, -1 unbound)."""

    def __init__(self, path, device, vocab_size: Optional[int] = None):
        traces = TraceSet.load(path)
        self.path = str(path)
        self.table = ReplayTable.from_traces(traces.requests, device=device, vocab_size=vocab_size)
        self.index = {}
        for i, r in enumerate(traces.requests):
            self.index.setdefault(tuple(int(x) for x in r.prompt.tolist()), i)
        self.slot_req = torch.empty(0, dtype=torch.long, device=device)
        self.device = device

    def reserve(self, pool_size: int) -> None:
        """Size ``slot_req`` for ``pool_size`` request slots (the request pool exists only once
        the worker allocated its memory pools; called at the first prefill)."""
        if self.slot_req.shape[0] < pool_size:
            grown = torch.full((int(pool_size),), -1, dtype=torch.long, device=self.device)
            grown[: self.slot_req.shape[0]] = self.slot_req
            self.slot_req = grown

    def bind(self, reqs) -> None:
        """The requests' pool slots -> their trace requests (host work, at prefill only);
        RuntimeError for a prompt the trace does not hold (unless the request is already
        finished: aborted)."""
        if not reqs:
            return
        found = [self.index.get(tuple(int(x) for x in r.origin_input_ids)) for r in reqs]
        # A request already aborted (check_prompt) still passes through a prefill; its tokens
        # are discarded: any trace request serves.
        found = [0 if f is None and _finished(r) else f for r, f in zip(reqs, found)]
        missing = [str(getattr(r, "rid", "?")) for r, f in zip(reqs, found) if f is None]
        if missing:
            raise RuntimeError(_missing_prompt(missing, self.path))
        slots = torch.tensor([releases.req_pool_idx(r) for r in reqs], dtype=torch.long)
        self.reserve(int(slots.max()) + 1)
        self.slot_req[slots.to(self.device)] = torch.tensor(found, dtype=torch.long).to(self.device)

    def requests_of(self, req_pool_indices: torch.Tensor) -> torch.Tensor:
        """``[bs]`` trace request per batch row (device gather)."""
        return self.slot_req[req_pool_indices.long()]


def active() -> Replay:
    if _active is None:
        raise RuntimeError(f"{BENCH_REPLAY.name}: no replay table in this process (the target worker did not start "
                           "with the switch set)")
    return _active


def replay_requests(path) -> List[dict]:
    """What a client sends to replay the trace at ``path``: per trace request, in order,
    ``{"input_ids": prompt, "sampling_params": {greedy, max_new_tokens = T, ignore_eos}}``
    (the engine's EOS need not be the recorder's; the output is the trace's ``T`` tokens)."""
    return [{"input_ids": r.prompt.tolist(),
             "sampling_params": {"temperature": 0.0, "max_new_tokens": int(r.output.shape[0]), "ignore_eos": True}}
            for r in TraceSet.load(path).requests]


# ----------------------------------------------------------------------------- hooks

def check_prompt(result, req, *args, **kwargs):
    """AFTER ``scheduler.validate_dflash_request`` (asked by the scheduler about every request of
    a DFlash-family server; a message aborts that request alone): the message for a prompt the
    trace does not hold."""
    if result is not None or _active is None:
        return result
    if tuple(int(x) for x in req.origin_input_ids) not in _active.index:
        return _missing_prompt([getattr(req, "rid", None)], _active.path)
    return result


def on_worker_init(result, self, *args, **kwargs):
    """AFTER ``TpModelWorker.__init__``: the target worker refuses real weights and loads the
    trace onto its device (the drafter's worker is skipped)."""
    global _active
    if self.is_draft_worker:
        return result
    refuse_real_weights(self.server_args)
    runner = self.model_runner
    _active = Replay(BENCH_REPLAY.get(), runner.device, runner.model_config.vocab_size)
    logger.warning("sglang-ddtree BENCH: replaying drafter trace %s (%d requests, L=%d, K=%d; filler token %d)",
                   _active.path, int(_active.table.out_len.shape[0]), _active.table.depth, _active.table.topk,
                   _active.table.filler)
    return result


def bind_prefill(self, *args, **kwargs):
    """BEFORE ``TpModelWorker.forward_batch_generation``: a target extend binds its requests."""
    batch = args[0] if args else kwargs.get("batch")
    if self.is_draft_worker or batch is None:
        return None
    mode = batch.forward_mode
    if mode.is_extend() and not mode.is_target_verify():
        pool = self.model_runner.req_to_token_pool
        if pool is not None:
            active().reserve(int(pool.req_to_token.shape[0]))
        active().bind(batch.reqs)
    return None


def replace_target_logits(result, self, *args, **kwargs):
    """AFTER ``ModelRunner.forward`` (module docstring): the target's logits rows one-hot at the
    trace's token after each row's sequence position: a verify's positions
    (``forward_batch.positions``, ``[bs * W]``), an extend's last position ``seq_len - 1``, a
    decode's position."""
    if self.is_draft_worker or _active is None:  # (None: a forward of the worker's own initialisation)
        return result
    forward_batch = args[0] if args else kwargs["forward_batch"]
    logits_output = getattr(result, "logits_output", None)
    logits = getattr(logits_output, "next_token_logits", None)
    mode = forward_batch.forward_mode
    if logits is None or mode.is_idle() or logits.shape[0] == 0:
        return result
    replay = active()
    n = logits.shape[0]
    if mode.is_target_verify():
        width = int(forward_batch.spec_info.draft_token_num)
        bs = n // width
        req = replay.requests_of(forward_batch.req_pool_indices[:bs])
        tokens = replay.table.targets(req, forward_batch.positions[:n].view(bs, width))
    elif mode.is_extend():
        req = replay.requests_of(forward_batch.req_pool_indices[:n])
        tokens = replay.table.targets(req, forward_batch.seq_lens[:n].long() - 1)
    elif mode.is_decode():
        req = replay.requests_of(forward_batch.req_pool_indices[:n])
        tokens = replay.table.targets(req, forward_batch.positions[:n])
    else:
        return result
    onehot_logits_(logits, tokens.reshape(-1))
    return result


def ddtree_draft(original, self, batch, draft_input, window, prefix_lens, *args, **kwargs):
    """AROUND ``DDTreeWorker.draft``: the drafter forward and head run, then the trace's
    proposals ``(lp [bs, L, topk] fp32, ids [bs, L, topk])`` at each request's state."""
    lp, ids = original(self, batch, draft_input, window, prefix_lens, *args, **kwargs)
    table = active().table
    if lp.shape[1] != table.depth:
        raise RuntimeError(f"{BENCH_REPLAY.name}: the drafter drafts {lp.shape[1]} depths, the trace "
                           f"{table.depth}")
    req = active().requests_of(batch.req_pool_indices)
    t_lp, t_ids = table.proposals(req, table.states(req, prefix_lens), self.topk)
    return t_lp.to(lp.dtype), t_ids.to(ids.dtype)


def dflash_chain(self, batch, *args, **kwargs):
    """BEFORE ``DFlashVerifyInput.prepare_for_verify`` (sglang's DFLASH verify; DDTREE's tree
    input is skipped): the block's drafts ``[bs, block - 1]`` overwritten in place with the
    trace's chain at each request's state (``batch.seq_lens``: the committed lengths)."""
    from ..verify_info import DDTreeVerifyInput

    if isinstance(self, DDTreeVerifyInput) or batch.forward_mode.is_idle():
        return None
    replay = active()
    width = int(self.draft_token_num)
    bs = self.draft_token.shape[0] // width
    if width - 1 != replay.table.depth:
        raise RuntimeError(f"{BENCH_REPLAY.name}: DFLASH drafts {width - 1} tokens a block, the trace "
                           f"{replay.table.depth} depths")
    req = replay.requests_of(batch.req_pool_indices[:bs])
    chain = replay.table.chain(req, replay.table.states(req, batch.seq_lens[:bs]))
    self.draft_token.view(bs, width)[:, 1:].copy_(chain.to(self.draft_token.dtype))
    return None


HOOKS = (
    ("sglang.srt.managers.scheduler.validate_dflash_request", "check_prompt", "AFTER"),
    ("sglang.srt.managers.tp_worker.TpModelWorker.__init__", "on_worker_init", "AFTER"),
    ("sglang.srt.managers.tp_worker.TpModelWorker.forward_batch_generation", "bind_prefill", "BEFORE"),
    ("sglang.srt.model_executor.model_runner.ModelRunner.forward", "replace_target_logits", "AFTER"),
    ("sglang_ddtree.worker.DDTreeWorker.draft", "ddtree_draft", "AROUND"),
    ("sglang.srt.speculative.dflash_info.DFlashVerifyInput.prepare_for_verify", "dflash_chain", "BEFORE"),
)


def register() -> None:
    """Install :data:`HOOKS` through sglang's ``HookRegistry``."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for target, name, kind in HOOKS:
        HookRegistry.register(target, globals()[name], getattr(HookType, kind))
