"""Soak: thousands of mixed requests through a DDTREE HTTP server and a server without
speculation on the same tiny model; afterwards nothing leaked and nothing failed.

Two ``python -m sglang.launch_server`` processes on one tiny model (``--model``): one with
``--speculative-algorithm DDTREE`` (the tiny DFlash drafter, ``--budget`` / ``--topk``), one
without speculation (the reference). ``--requests`` requests, deterministic from ``--seed``, go
to them with at most ``--concurrency`` in flight per server, of these kinds:

- ``greedy``: ``/generate``, temperature 0 (some with ``ignore_eos``);
- ``chat``: ``/v1/chat/completions``, temperature 0, ``return_token_ids``;
- ``sampled``: temperature / top-p / top-k / min-p with a ``sampling_seed`` and ``ignore_eos``:
  only checked to return exactly ``max_new_tokens`` tokens (not comparable token for token);
- ``penalised``: greedy with frequency / presence penalties, or the repetition penalty (never
  both: their order differs between sglang's plain and speculative decoding), ``min_new_tokens``;
- ``logprobs``: greedy with ``return_logprob``, ``top_logprobs_num`` and input logprobs from a
  start position;
- ``structured``: greedy under a regex, JSON schema or EBNF grammar (``gpu_cases.GRAMMARS``);
- ``stops``: greedy with stop strings, stop token ids and / or a stop regex;
- ``disconnect``: a streaming ``/generate`` or chat request the client closes after 1-3 chunks;
- ``abort``: a streaming ``/generate`` request aborted through ``/abort_request`` after its
  first chunk (outcome ``abort``, or finished before the abort arrived);
- ``n_gt_1``: OpenAI completions or chat with ``n`` 2-4, sampled, ``ignore_eos``: ``n`` choices
  of exactly ``max_tokens`` tokens each;
- ``refusal``: ``input_ids`` holding an id the model cannot embed: must be answered 4xx (the
  intended refusals; sent to the DDTREE server only, whose admission check refuses them:
  sglang 0.5.17 without the plugin's check lets the scheduler crash on them);
- ``token_ids_logprob``: greedy with ``token_ids_logprob`` (and top logprobs), sent in a phase of
  their own once the servers are idle: sglang 0.5.17 itself fails a prefill batch mixing
  requests with and without ``token_ids_logprob``.

Every greedy kind is sent to both servers and compared: output token ids equal, else cut at a
near-tie of the reference (``gpu_cases.compare_to_reference``: DDTREE's token among the
reference's top :data:`REF_TOP` log-probs, within ``--near-tie-tol`` of the best; default 0 on
CPU, i.e. exact (float32); on CUDA :data:`FP32_TOL` with ``--dtype float32``, else
:data:`NEAR_TIE_TOL_CUDA` of the model's kind, where bf16 verify and decode shapes differ); returned log-probs within ``--logprob-tol`` and their token ids equal (top-n
entries tied within it may swap, also across the list's cut). The other kinds go to the DDTREE
server only.

``--serial-check N`` (CUDA default 64): after the load, the first ``N`` greedy ``/generate``
requests again, one at a time, to both servers: the reference against its own answer under load
(how far bf16 batch shapes move the reference itself) and DDTREE against the reference, both
alone (as the GPU suite compares); the latter counts toward the verdict.

With ``--oracle first`` (default) the DDTREE server drafts through the test-only oracle
drafter (``SGLANG_DDTREE_TEST_ORACLE``) from the reference server's greedy outputs, so whole
paths are accepted (some continuations cut short at random: acceptance stops there): the
workload runs in chunks, the reference first, the oracle file rewritten after each reference
chunk, the DDTREE server one chunk behind. ``--oracle none``: the tiny drafter's own (random)
drafts.

Afterwards (also after ``--timeout-s``, which stops sending that long after both servers are
up): both servers idle, serve a health
request, and then every pool is free: ``/server_info``'s ``pool_counts``
(``SGLANG_DDTREE_TEST_POOL_COUNTS``, ``testing/pool_counts.py``: KV, request and linear-attention
state pools, ``available + evictable == total``, and sglang's own invariant check), with sglang's
strict idle memory check on (``SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE=1``: a leak raises in
the scheduler). Each server must still be alive and its log free of tracebacks and leak messages.

Output: a JSON summary at ``--out`` (counts per kind and server, failures, mismatches, near-tie
cuts, pool counts, accept statistics, duration, requests/s) and one summary line on stdout.
Exit status 0 when nothing failed, mismatched or leaked and both servers lived; 1 otherwise
(a run cut by ``--timeout-s`` is not a failure by itself: ``complete`` says whether every
planned request was sent).

    python benchmark/ddtree/soak.py --model llama --device cpu --requests 60 --concurrency 8 --out soak.json
    python benchmark/ddtree/soak.py --model qwen35 --device cuda --requests 2500 --out soak-qwen35.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT / "python", ROOT / "test" / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from cpu_engine import ServerStartError, cpu_engine_env, cpu_server_args, http_server  # noqa: E402
from gpu_cases import GRAMMARS, NEAR_TIE_TOL, compare_to_reference, logprob_tol as gpu_logprob_tol  # noqa: E402

KINDS = ("greedy", "chat", "sampled", "penalised", "logprobs", "structured", "stops", "disconnect", "abort",
         "n_gt_1", "refusal", "token_ids_logprob")
# Relative frequency of each kind after the first request of every kind.
WEIGHTS = {"greedy": 16, "chat": 8, "sampled": 10, "penalised": 10, "logprobs": 10, "structured": 9, "stops": 10,
           "disconnect": 6, "abort": 6, "n_gt_1": 6, "refusal": 4, "token_ids_logprob": 5}
COMPARED = ("greedy", "chat", "penalised", "logprobs", "structured", "stops", "token_ids_logprob")
LATE = ("token_ids_logprob",)  # their own phase, on an idle server
MODELS = ("llama", "qwen35", "llama64", "qwen3564")
SPECIAL_IDS = 4  # the tiny tokenizer's special tokens are ids 0-3 (tiny_models.SPECIAL_TOKENS)
WORDS = ("the a tree draft token verify accept model layer state block path node depth budget fast slow river "
         "stone light cloud green blue seven three nine apple table window").split()
STOP_STRINGS = (["e"], ["the"], ["a", "."], ["in", "ou"], [" t"], ["!"], ["ee", "99"])
STOP_REGEXES = (r"\d\d", r"[.!?]", r"(tr|dr)")
# The reference's top log-probs per position asked for the near-tie rule (tiny random models'
# logits are flat: three or more candidates often tie within bf16 noise).
REF_TOP = 5
# Near-tie tolerance on CUDA in bf16 per target kind (nats). Llama: one bf16 step of a logit in
# [8, 16) (the tiny Llama's top logits; its verify and decode logits differ by single steps).
# Hybrid: its bf16 logits move further between verify and decode shapes, with any speculative
# algorithm (sglang's DFLASH leaves plain decoding at the same positions with the same gaps,
# up to 1.1 nats: RESULTS, benchmark/ddtree/divergence.py); --dtype float32 is the sharp check
# (the hybrid's through dtype_env).
NEAR_TIE_TOL_CUDA = {"llama": 0.0625, "qwen35": 0.2}
# Near-tie and log-prob tolerance on CUDA in float32 (nats).
FP32_TOL = 0.01


def _choice_ids(choice):
    """The output token ids of an OpenAI-style choice asked with ``return_token_ids``: sglang
    0.5.17 names them ``token_ids``, 0.5.23 ``response_token_ids`` (None if absent)."""
    ids = choice.get("token_ids")
    return ids if ids is not None else choice.get("response_token_ids")


def dtype_env(model: str, device: str, dtype: str) -> dict:
    """Environment both servers of ``model`` need to serve ``dtype`` on ``device``: sglang 0.5.17's
    norms (``RMSNorm``, ``GemmaRMSNorm``) and rope call ``sgl_kernel`` kernels that have no float32
    CUDA version (a server without speculation fails to start the same way), so float32 on CUDA
    runs their native torch paths (the test plugin's ``SGLANG_DDTREE_TEST_FP32_NORMS``). The
    hybrid's conv state pool is bf16 whatever ``--dtype`` says unless sglang's own
    ``SGLANG_MAMBA_CONV_DTYPE`` names another, and its prefill conv kernel cannot mix a bf16
    state with float32 inputs (a Triton compile error in both servers): float32 there too. And
    Triton's ``tl.dot`` on float32 tiles defaults to TF32 (10-bit mantissa: sglang's decode and
    extend attention kernels take that default), which moves a tiny model's log-probs by ~0.01-0.02
    nats between the two servers' different kernels: ``TRITON_F32_DEFAULT=ieee`` makes every
    default-precision dot full float32 in both."""
    if device == "cuda" and dtype == "float32":
        env = {"SGLANG_DDTREE_TEST_FP32_NORMS": "1", "TRITON_F32_DEFAULT": "ieee"}
        if model == "qwen35":
            env["SGLANG_MAMBA_CONV_DTYPE"] = "float32"
        return env
    return {}


LOG_ERRORS = ("Traceback (most recent call last)", "memory leak", "Mem Leak Detected", "Pool Mem Leak")


@dataclass
class Item:
    """One planned request: ``kind``, endpoint ``path`` and JSON ``body``; ``prompt`` (token
    ids) for the kinds sent as ids; ``chunk``: the pipeline chunk it belongs to."""

    index: int
    kind: str
    path: str
    body: dict
    prompt: Optional[list] = None
    chunk: int = 0
    extra: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- the plan


def _prompt(rng: random.Random, vocab: int, prefixes: list, seen: set) -> list:
    """A prompt of token ids never planned before (the oracle drafter keys by prompt): 30% one
    of the shared prefixes (radix-cache hits) plus a tail, else 2-40 random ids."""
    while True:
        if rng.random() < 0.3:
            p = rng.choice(prefixes) + [rng.randrange(SPECIAL_IDS, vocab) for _ in range(rng.randint(1, 24))]
        else:
            p = [rng.randrange(SPECIAL_IDS, vocab) for _ in range(rng.randint(2, 40))]
        if tuple(p) not in seen:
            seen.add(tuple(p))
            return p


def _max_new(rng: random.Random, cap: int) -> int:
    """A request's ``max_new_tokens``: mostly 3-48, sometimes 1-2 or 48-96; at most ``cap``."""
    return min(cap, rng.choices([1, 2, rng.randint(3, 24), rng.randint(16, 48), rng.randint(48, 96)],
                                weights=[3, 3, 40, 40, 14])[0])


def _greedy(rng, m, **kw) -> dict:
    sp = dict(temperature=0.0, max_new_tokens=m, **kw)
    if rng.random() < 0.25:
        sp["ignore_eos"] = True
    return sp


def _penalties(rng, m) -> dict:
    pick = rng.choice(["frequency", "presence", "additive", "repetition", "min_new", "min_new+frequency",
                       "min_new+repetition"])
    sp = {}
    if "frequency" in pick or pick == "additive":
        sp["frequency_penalty"] = round(rng.uniform(0.3, 1.5), 2)
    if "presence" in pick or pick == "additive":
        sp["presence_penalty"] = round(rng.uniform(0.3, 1.5), 2)
    if "repetition" in pick:
        sp["repetition_penalty"] = round(rng.uniform(1.1, 1.8), 2)
    if "min_new" in pick:
        sp["min_new_tokens"] = rng.randint(1, m)
    return sp


def _stops(rng, vocab) -> dict:
    pick = rng.choice(["str", "ids", "regex", "str+ids", "ids+regex"])
    sp = {}
    if "str" in pick:
        sp["stop"] = rng.choice(STOP_STRINGS)
    if "ids" in pick:
        sp["stop_token_ids"] = rng.sample(range(SPECIAL_IDS, vocab), rng.randint(4, 12))
    if "regex" in pick:
        sp["stop_regex"] = rng.choice(STOP_REGEXES)
    return sp


def _message(rng) -> list:
    msgs = [{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 14)))}]
    if rng.random() < 0.3:
        msgs.insert(0, {"role": "system", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8)))})
    return msgs


def plan(n: int, seed: int, vocab: int, max_new: int = 96) -> list:
    """``n`` :class:`Item` s, deterministic from ``seed``: one of every kind, the rest drawn by
    :data:`WEIGHTS`, shuffled; ``max_new_tokens`` at most ``max_new`` (aborted and disconnected
    requests excepted: 256-1024, cut by the client). Raises ValueError if ``n`` is smaller than
    the number of kinds."""
    if n < len(KINDS):
        raise ValueError(f"--requests must be at least {len(KINDS)} (one request of every kind)")
    rng = random.Random(seed)
    prefixes = [[rng.randrange(SPECIAL_IDS, vocab) for _ in range(rng.randint(8, 24))] for _ in range(4)]
    kinds = list(KINDS) + rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=n - len(KINDS))
    rng.shuffle(kinds)
    seen: set = set()
    items = []
    for i, kind in enumerate(kinds):
        m = _max_new(rng, max_new)
        if kind == "chat":
            body = {"model": "tiny", "messages": _message(rng), "max_tokens": m, "temperature": 0.0,
                    "return_token_ids": True}
            items.append(Item(i, kind, "/v1/chat/completions", body))
            continue
        if kind == "n_gt_1":
            nn = rng.randint(2, 4)
            common = {"model": "tiny", "n": nn, "max_tokens": min(max_new, max(m, 4)), "temperature": rng.choice([0.7, 1.0]),
                      "top_p": 0.95, "seed": rng.randrange(2**31), "ignore_eos": True, "return_token_ids": True}
            if rng.random() < 0.5:
                items.append(Item(i, kind, "/v1/completions",
                                  dict(common, prompt=_prompt(rng, vocab, prefixes, seen))))
            else:
                items.append(Item(i, kind, "/v1/chat/completions", dict(common, messages=_message(rng))))
            continue
        p = _prompt(rng, vocab, prefixes, seen)
        if kind == "greedy":
            sp = _greedy(rng, m)
        elif kind == "sampled":
            sp = dict(temperature=rng.choice([0.5, 0.8, 1.0, 1.3]), top_p=rng.choice([1.0, 0.9, 0.5]),
                      top_k=rng.choice([-1, 5, 40]), min_p=rng.choice([0.0, 0.05]),
                      sampling_seed=rng.randrange(2**31), max_new_tokens=m, ignore_eos=True)
        elif kind == "penalised":
            sp = dict(temperature=0.0, max_new_tokens=m, **_penalties(rng, m))
        elif kind == "structured":
            sp = dict(temperature=0.0, max_new_tokens=min(max_new, max(m, 8)), **rng.choice(GRAMMARS))
        elif kind == "stops":
            sp = _greedy(rng, min(max_new, max(m, 16)), **_stops(rng, vocab))
        elif kind in ("disconnect", "abort"):
            sp = dict(temperature=rng.choice([0.0, 0.0, 0.8]), max_new_tokens=rng.randint(256, 1024),
                      ignore_eos=True)
        else:  # logprobs, token_ids_logprob, refusal
            sp = dict(temperature=0.0, max_new_tokens=m)
        body = {"input_ids": p, "sampling_params": sp}
        extra = {}
        if kind == "logprobs":
            body.update(return_logprob=True, top_logprobs_num=rng.choice([0, 1, 2, 5]),
                        logprob_start_len=rng.choice([-1, -1, 0, len(p) // 2]))
        elif kind == "token_ids_logprob":
            body.update(return_logprob=True, top_logprobs_num=rng.choice([0, 2]),
                        token_ids_logprob=rng.sample(range(vocab), rng.randint(1, 4)))
        elif kind == "refusal":
            bad = rng.choice([vocab + rng.randrange(10**6), -1 - rng.randrange(100)])
            body["input_ids"] = p[:-1] + [bad]
            if rng.random() < 0.5:  # the same through the OpenAI completions endpoint
                items.append(Item(i, kind, "/v1/completions",
                                  {"model": "tiny", "prompt": body["input_ids"], "max_tokens": m}, p))
                continue
        elif kind == "disconnect":
            extra["chunks"] = rng.randint(1, 3)
            if rng.random() < 0.4:  # an OpenAI streaming chat instead
                items.append(Item(i, kind, "/v1/chat/completions",
                                  {"model": "tiny", "messages": _message(rng), "max_tokens": sp["max_new_tokens"],
                                   "temperature": sp["temperature"], "ignore_eos": True, "stream": True},
                                  None, extra=extra))
                continue
            body["stream"] = True
        elif kind == "abort":
            body["stream"] = True
        items.append(Item(i, kind, "/generate", body, p, extra=extra))
    return items


# ----------------------------------------------------------------------------- requests


class SoakError(Exception):
    """A request that failed (transport error, unexpected status or a malformed answer)."""


def _why(e: Exception) -> str:
    return str(e) if isinstance(e, SoakError) else f"{type(e).__name__}: {e}"


def _post(session, base, path, body, timeout):
    import requests

    try:
        r = session.post(base + path, json=body, timeout=timeout)
    except requests.RequestException as e:
        raise SoakError(f"{path}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise SoakError(f"{path}: HTTP {r.status_code}: {r.text[:300]}")
    return r.json()


def _stream_events(resp):
    """The JSON payloads of an SSE response (``data: ...`` lines), ``[DONE]`` left out."""
    for line in resp.iter_lines():
        if line.startswith(b"data:") and line.strip() != b"data: [DONE]":
            yield json.loads(line[5:])


def send(base: str, item: Item, session, timeout: float, ref: bool, near_tie_tol: float) -> dict:
    """Send ``item`` to the server at ``base``; returns what the checks need (``output_ids``,
    ``meta``, ``choices``, ``outcome``...). ``ref``: the reference server (greedy kinds ask it for
    its top :data:`REF_TOP` log-probs when ``near_tie_tol`` > 0). Raises :class:`SoakError` on a failed request."""
    import requests

    body = json.loads(json.dumps(item.body))
    if item.kind == "refusal":
        r = session.post(base + item.path, json=body, timeout=timeout)
        if not 400 <= r.status_code < 500:
            raise SoakError(f"refusal answered HTTP {r.status_code}, not 4xx: {r.text[:300]}")
        return {"outcome": "refused", "status": r.status_code}
    if item.kind == "disconnect":
        # A connection of its own, closed mid-stream (the server must abort the request).
        got = 0
        try:
            with requests.post(base + item.path, json=body, stream=True, timeout=timeout) as r:
                if r.status_code != 200:
                    raise SoakError(f"{item.path}: HTTP {r.status_code}: {r.text[:300]}")
                for _ in _stream_events(r):
                    got += 1
                    if got >= item.extra["chunks"]:
                        break
        except requests.RequestException as e:
            raise SoakError(f"{item.path}: {type(e).__name__}: {e}") from None
        return {"outcome": "disconnected" if got >= item.extra["chunks"] else "ended_first", "chunks": got}
    if item.kind == "abort":
        rid = f"soak-{item.index}-{uuid.uuid4().hex[:8]}"
        body["rid"] = rid
        last, aborted_sent = None, False
        try:
            with session.post(base + item.path, json=body, stream=True, timeout=timeout) as r:
                if r.status_code != 200:
                    raise SoakError(f"{item.path}: HTTP {r.status_code}: {r.text[:300]}")
                for ev in _stream_events(r):
                    if "error" in ev:
                        raise SoakError(f"abort stream error: {ev['error']}")
                    last = ev
                    if not aborted_sent:
                        aborted_sent = True
                        a = session.post(base + "/abort_request", json={"rid": rid}, timeout=timeout)
                        if a.status_code != 200:
                            raise SoakError(f"/abort_request: HTTP {a.status_code}: {a.text[:300]}")
        except requests.RequestException as e:
            raise SoakError(f"{item.path}: {type(e).__name__}: {e}") from None
        if last is None:
            raise SoakError("abort: the stream ended without a chunk")
        reason = (last["meta_info"].get("finish_reason") or {}).get("type")
        if reason not in ("abort", "length"):
            raise SoakError(f"abort: finish reason {reason!r}")
        return {"outcome": "aborted" if reason == "abort" else "finished_first"}
    if ref and near_tie_tol > 0 and item.kind in COMPARED:
        if item.path == "/generate":
            body["return_logprob"] = True
            body["top_logprobs_num"] = max(REF_TOP, body.get("top_logprobs_num", 0))
        else:
            body.update(logprobs=True, top_logprobs=REF_TOP)
    out = _post(session, base, item.path, body, timeout)
    if item.path == "/generate":
        return {"output_ids": out["output_ids"], "meta": out["meta_info"]}
    return {"choices": out["choices"], "usage": out.get("usage")}


# ----------------------------------------------------------------------------- checks


def _first_diff(a: list, b: list) -> Optional[int]:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _top(meta: dict) -> Optional[list]:
    """The reference's output top log-probs per position as ``(logprob, id, None)``."""
    top = meta.get("output_top_logprobs")
    return [[(e[0], e[1], None) for e in pos] for pos in top] if top else None


def _compare_ids(got: list, ref: list, top: Optional[list], tol: float) -> dict:
    """``{"compared", "equal", "near_tie"}`` as ``gpu_cases.compare_to_reference``; without
    top log-probs (``tol`` 0) any difference is a mismatch."""
    if tol > 0 and top is not None and len(top) >= len(ref):
        return compare_to_reference(got, ref, top, tol)
    i = _first_diff(got, ref)
    if i is None:
        return {"compared": len(ref), "equal": True, "near_tie": None}
    return {"compared": i, "equal": False, "near_tie": None}


def _logprob_pairs(meta: dict, key: str) -> list:
    """Per position, the ``(logprob, id)`` entries of one logprob field (top-n and id lists as a
    list, single entries as a one-element list)."""
    out = []
    for pos in meta.get(key) or []:
        if pos is None:
            out.append([])
        elif pos and isinstance(pos[0], (list, tuple)):
            out.append([(e[0], e[1]) for e in pos])
        else:
            out.append([(pos[0], pos[1])])
    return out


def _same_top(got: list, want: list, tol: float) -> Optional[str]:
    """Why DDTREE's top-n entries at one position differ from the reference's ``want`` (its top
    list, as long or longer: it may have been asked for more), or None. Values rank by rank within
    ``tol``; each id the reference's with a value within ``tol``, or, not listed there, a tie
    within ``tol`` of the reference's last listed value (a tie across the cut)."""
    if len(want) < len(got):
        return f"{len(got)} entries vs {len(want)}"
    have = {wi: wv for wv, wi in want}
    for (gv, gi), (wv, _) in zip(got, want):
        if gv is None or wv is None:
            if gv != wv:
                return f"logprob {gv} vs {wv}"
            continue
        if abs(gv - wv) > tol:
            return f"logprob at its rank: {gv:.5f} vs {wv:.5f}"
        ref_v = have.get(gi, want[-1][0])
        if ref_v is None or abs(gv - ref_v) > tol:
            return f"id {gi}: {gv:.5f} vs the reference's {ref_v}" + ("" if gi in have else " (not listed)")
    return None


def _same_entries(got: list, want: list, tol: float) -> Optional[str]:
    """Why one position's logprob entries differ (ids, or values beyond ``tol``), or None (lists
    of fixed ids: token logprobs, ``token_ids_logprob``)."""
    if len(got) != len(want):
        return f"{len(got)} entries vs {len(want)}"
    for (gv, gi), (wv, wi) in zip(got, want):
        if gv is None or wv is None:
            if gv != wv:
                return f"logprob {gv} vs {wv}"
            continue
        if abs(gv - wv) > tol:
            return f"logprob of {gi}: {gv:.5f} vs {wv:.5f}"
        if gi != wi:
            return f"id {gi} vs {wi}"
    return None


LOGPROB_KEYS = ("output_token_logprobs", "output_top_logprobs", "output_token_ids_logprobs")
INPUT_LOGPROB_KEYS = ("input_token_logprobs", "input_top_logprobs", "input_token_ids_logprobs")


def _ambiguous_text(tok, text: str) -> bool:
    """Whether more than one vocabulary id decodes to ``text`` alone (byte-level BPE: every
    lone byte of a multi-byte character decodes to U+FFFD), so that an OpenAI top-logprob entry
    named by its text cannot say which id it is. Per-tokenizer cache (the soak's tiny vocabularies)."""
    counts = getattr(tok, "_soak_text_counts", None)
    if counts is None:
        counts = {}
        for i in range(len(tok)):
            t = tok.decode([i])
            counts[t] = counts.get(t, 0) + 1
        tok._soak_text_counts = counts
    return counts.get(text, 0) > 1


def check(item: Item, got: dict, ref: Optional[dict], tol: float, logprob_tol: float, tokenizer,
          rescore=None) -> tuple:
    """``(status, detail)`` of a DDTREE answer: status ``ok``, ``near_tie`` (equal up to a bf16
    near-tie of the reference, where it took the other of the top two), ``mismatch`` or
    ``failed`` (a wrong answer of a kind with nothing to compare).

    A chat answer's near-tie is read from the reference's top logprobs, which the OpenAI format
    names by text; where DDTREE's token's text is ambiguous (``_ambiguous_text``) the gap comes
    from ``rescore(ids, want) -> (greedy id, {id: logprob})`` instead: the reference server
    scoring both ids after the prompt and the common prefix (``/generate``,
    ``token_ids_logprob``). Without ``rescore`` such a difference is a mismatch."""
    kind, body = item.kind, item.body
    if kind in ("refusal", "disconnect", "abort"):
        return "ok", got["outcome"]
    if kind == "sampled":
        m = body["sampling_params"]["max_new_tokens"]
        n, reason = len(got["output_ids"]), (got["meta"].get("finish_reason") or {}).get("type")
        return ("ok", None) if n == m and reason == "length" else ("failed", f"{n} tokens of {m}, finish {reason}")
    if kind == "n_gt_1":
        choices = got["choices"]
        lens = [len(_choice_ids(c) or []) for c in choices]
        if len(choices) != body["n"] or any(x != body["max_tokens"] for x in lens):
            return "failed", f"{len(choices)} choices of {body['n']}, token counts {lens} (want {body['max_tokens']})"
        return "ok", None
    if ref is None:
        return "no_reference", None
    if kind == "chat":
        g, r = got["choices"][0], ref["choices"][0]
        gi, ri = _choice_ids(g), _choice_ids(r)
        if gi is None or ri is None:
            return "failed", "no token_ids in the chat answer"
        i = _first_diff(gi, ri)
        if i is None:
            return "ok", None
        content = ((r.get("logprobs") or {}).get("content") or [])
        if tol > 0 and i < len(gi) and i < len(content) and len(content[i].get("top_logprobs") or []) >= 2:
            top = content[i]["top_logprobs"]
            mine = tokenizer().decode([gi[i]])
            window = {"pos": i, "got": gi[max(0, i - 2): i + 3], "ref": ri[max(0, i - 2): i + 3], "mine": mine}
            prompt = r.get("prompt_token_ids")
            if _ambiguous_text(tokenizer(), mine):
                if rescore is None or i >= len(ri) or not prompt:
                    return "mismatch", dict(window, why="ambiguous token text, not re-scored")
                greedy, lp = rescore(list(prompt) + list(ri[:i]), [ri[i], gi[i]])
                gap = lp[ri[i]] - lp[gi[i]]
                if gap <= tol:
                    return "near_tie", {"pos": i, "gap": gap, "rescored": True}
                return "mismatch", dict(window, gap=gap, rescored={"greedy": greedy, "logprobs": lp})
            gap = next((top[0]["logprob"] - t["logprob"] for t in top if t["token"] == mine), None)
            if gap is not None and gap <= tol:
                return "near_tie", {"pos": i, "gap": gap}
            return "mismatch", dict(window, gap=gap, top=[(t["token"], round(t["logprob"], 4)) for t in top])
        return "mismatch", {"pos": i, "got": gi[max(0, i - 2): i + 3], "ref": ri[max(0, i - 2): i + 3]}
    gm, rm = got["meta"], ref["meta"]
    c = _compare_ids(got["output_ids"], ref["output_ids"], _top(rm), tol)
    if not c["equal"] and not (c["near_tie"] and c["near_tie"]["ok"]):
        i = c["compared"]
        return "mismatch", {"pos": i, "got": got["output_ids"][max(0, i - 2): i + 3],
                            "ref": ref["output_ids"][max(0, i - 2): i + 3], "near_tie": c["near_tie"],
                            "finish": [(gm.get("finish_reason") or {}).get("type"),
                                       (rm.get("finish_reason") or {}).get("type")]}
    if body.get("return_logprob"):
        upto = c["compared"]
        k = body.get("top_logprobs_num", 0)
        for key in LOGPROB_KEYS + INPUT_LOGPROB_KEYS:
            if "_top_" in key and not k:  # not asked of the DDTREE server (the reference's top-2 only)
                continue
            ge, we = _logprob_pairs(gm, key), _logprob_pairs(rm, key)
            if key in LOGPROB_KEYS:
                ge, we = ge[:upto], we[:upto]
            if len(ge) != len(we):
                return "mismatch", {"key": key, "positions": [len(ge), len(we)]}
            same = _same_top if "_top_" in key else _same_entries
            for pos, (a, b) in enumerate(zip(ge, we)):
                why = same(a, b, logprob_tol)
                if why:
                    return "mismatch", {"key": key, "pos": pos, "why": why}
    return ("ok", None) if c["equal"] else ("near_tie", c["near_tie"])


# ----------------------------------------------------------------------------- servers


def server_args(model: str, device: str, spec: bool, budget: int, topk: int, concurrency: int, extra=(),
                dtype: str = "bfloat16") -> list:
    """``launch_server`` arguments of one soak server (``spec``: DDTREE), then ``extra``.

    CPU: the test servers' (``cpu_engine.cpu_server_args``: float32) with ``--sleep-on-idle``.
    CUDA: ``dtype``,
    triton attention, pytorch sampling, CUDA graphs for decode / verify up to ``concurrency``
    requests (prefill graphs off, as in the GPU suite), overlap scheduling (sglang's default) on the
    DDTREE server, none on the reference (its penalties would lag a token). The
    hybrid targets: no radix cache on either server (on the tiny text-only hybrid sglang 0.5.17
    resumes cached prefixes differently from a fresh prefill, with or without speculation),
    DDTREE in ``--speculative-ddtree-gdn-mode wy``."""
    from sglang_ddtree.testing import tiny_models

    hybrid = model.startswith("qwen35")
    run = ["--disable-radix-cache"] if hybrid else []
    if not spec:
        # The reference penalises exactly only without overlap scheduling: with it, sglang 0.5.17
        # counts each step's output one token late (README, Limits); DDTREE is exact either way.
        run += ["--disable-overlap-schedule"]
    if spec:
        run += ["--speculative-algorithm", "DDTREE",
                "--speculative-draft-model-path", str(tiny_models.model_path(f"dflash-{model}")),
                "--speculative-ddtree-budget", str(budget), "--speculative-ddtree-topk", str(topk)]
        if hybrid:
            run += ["--speculative-ddtree-gdn-mode", "wy"]
    if device == "cpu":  # (an idle sglang scheduler otherwise spins a core: two servers on 2 cores crawl)
        return cpu_server_args(model, ["--sleep-on-idle", *run, *map(str, extra)])
    return ["--model-path", str(tiny_models.model_path(model)), "--device", "cuda", "--dtype", dtype,
            "--attention-backend", "triton", "--sampling-backend", "pytorch", "--mem-fraction-static", "0.25",
            "--max-total-tokens", "131072", "--max-running-requests", str(concurrency + 16),
            "--cuda-graph-max-bs-decode", str(concurrency),
            "--disable-prefill-cuda-graph", "--log-level", "warning", *run, *map(str, extra)]


def _info(base: str) -> dict:
    import requests

    return requests.get(base + "/server_info", timeout=60).json()["internal_states"][0]


def wait_idle(base: str, timeout_s: float) -> Optional[dict]:
    """Poll ``/server_info`` until the scheduler is idle; its ``pool_counts`` then, or None at
    ``timeout_s``."""
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            counts = _info(base)["pool_counts"]
            if counts["idle"]:
                return counts
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    return None


def final_check(base: str, proc, log: Path, idle_timeout_s: float) -> dict:
    """The end-of-soak check of one server: idle, a health request served, idle again, then
    (after 2 s of idle, which sglang's strict idle check runs in) its pool counts, leaks, whether
    the process lives and the error lines of its log."""
    import requests

    res = {"alive": proc.poll() is None, "idle": False, "health": None, "pool_counts": None, "leaks": [],
           "log_errors": []}
    if res["alive"] and wait_idle(base, idle_timeout_s) is not None:
        try:
            res["health"] = requests.get(base + "/health_generate", timeout=60).status_code
        except requests.RequestException as e:
            res["health"] = repr(e)
        time.sleep(2.0)
        counts = wait_idle(base, idle_timeout_s)
        if counts is not None:
            from sglang_ddtree.testing.pool_counts import leaked_pools

            res.update(idle=True, pool_counts=counts, leaks=leaked_pools(counts))
    res["alive"] = proc.poll() is None
    text = log.read_text(errors="replace")
    res["log_errors"] = [line for line in text.splitlines() if any(e in line for e in LOG_ERRORS)][:20]
    res["ok"] = (res["alive"] and res["idle"] and res["health"] == 200 and not res["leaks"]
                 and not res["log_errors"])
    return res


# ----------------------------------------------------------------------------- the run


class Tally:
    """Per-kind, per-server counts and the first failures / mismatches (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.kinds = {k: {"planned": 0, "sent": 0, "ok": 0, "near_tie": 0, "failed": 0, "mismatch": 0,
                          "no_reference": 0, "ref_sent": 0, "ref_failed": 0, "outcomes": {}, "seconds": 0.0,
                          "ref_seconds": 0.0}
                      for k in KINDS}
        self.failures, self.mismatches, self.near_ties = [], [], []

    def add(self, item: Item, status: str, detail=None, ref: bool = False, seconds: float = 0.0):
        """Count one answer (``ref``: the reference server's; ``seconds``: its wall time)."""
        with self.lock:
            k = self.kinds[item.kind]
            key = "ref_seconds" if ref else "seconds"
            k[key] = round(k[key] + seconds, 3)
            if ref:
                k["ref_sent"] += 1
                if status == "failed":
                    k["ref_failed"] += 1
                    self.failures.append({"server": "ref", "index": item.index, "kind": item.kind, "detail": detail})
                return
            k["sent"] += 1
            k[status] += 1
            if item.kind in ("refusal", "disconnect", "abort") and status == "ok":
                k["outcomes"][detail] = k["outcomes"].get(detail, 0) + 1
            rec = {"index": item.index, "kind": item.kind, "detail": detail}
            if status == "failed":
                self.failures.append(dict(rec, server="ddtree"))
            elif status == "mismatch":
                self.mismatches.append(rec)
            elif status == "near_tie":
                self.near_ties.append(rec)


_SERVERS: list = []  # the running server processes (their groups are stopped on SIGTERM)


def _stop_servers() -> None:
    """SIGTERM every running soak server's process group."""
    for proc in _SERVERS:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)


def _on_sigterm(signum, frame):
    # Killed from outside (a call's time limit): take the servers along, which live in process
    # groups of their own, and exit without a summary.
    _stop_servers()
    os._exit(128 + signum)


def serial_check(items: list, refs: dict, ref_base: str, spec_base: str, timeout: float, tol: float) -> dict:
    """``items`` (greedy ``/generate``) once more, one at a time, to each server (the two servers
    at once). ``ref_load_vs_serial``: the reference's answer under load against its answer alone;
    ``ddtree_vs_ref``: DDTREE alone against the reference alone. Each: counts of ``equal``,
    ``near_tie`` and ``mismatch`` (rule of :func:`_compare_ids` at ``tol``) and the first
    differences' ``gaps`` (nats; for a mismatch, a lower bound when the token was not listed)."""
    import requests

    def alone(base, ref):
        s = requests.Session()
        s.headers["Connection"] = "close"
        out = {}
        for it in items:
            try:
                out[it.index] = send(base, it, s, timeout, ref, tol)
            except Exception as e:  # counted below
                out[it.index] = _why(e)
        return out

    with ThreadPoolExecutor(2) as pool:
        fr, fd = pool.submit(alone, ref_base, True), pool.submit(alone, spec_base, False)
        ref_alone, dd_alone = fr.result(), fd.result()
    res = {"items": len(items), "failed": 0, "failure_details": []}
    pairs = {"ref_load_vs_serial": lambda i: refs[i], "ddtree_vs_ref": lambda i: dd_alone[i]}
    for name in pairs:
        res[name] = {"equal": 0, "near_tie": 0, "mismatch": 0, "gaps": [], "details": []}
    for it in items:
        r = ref_alone[it.index]
        if isinstance(r, str) or isinstance(dd_alone[it.index], str):
            res["failed"] += 1
            res["failure_details"].append({"index": it.index, "ref": r if isinstance(r, str) else None,
                                           "ddtree": dd_alone[it.index] if isinstance(dd_alone[it.index], str) else None})
            continue
        for name, got in pairs.items():
            c = _compare_ids(got(it.index)["output_ids"], r["output_ids"], _top(r["meta"]), tol)
            t = res[name]
            if c["equal"]:
                t["equal"] += 1
                continue
            nt = c["near_tie"]
            t["near_tie" if nt and nt["ok"] else "mismatch"] += 1
            if nt:
                t["gaps"].append(round(nt["gap"], 4))
            if len(t["details"]) < 20:
                t["details"].append({"index": it.index, "pos": c["compared"], "near_tie": nt})
    return res


def run(a) -> dict:
    """The whole soak (see the module docstring); returns the summary."""
    import requests

    from sglang_ddtree.testing import tiny_models
    from sglang_ddtree.testing.oracle_drafter import write_oracle_file

    t0 = time.time()
    deadline = math.inf  # set once both servers are up
    kind_key = "qwen35" if a.model.startswith("qwen35") else "llama"
    fp32 = a.device == "cuda" and a.dtype == "float32"
    tol = a.near_tie_tol if a.near_tie_tol is not None else (
        0.0 if a.device == "cpu" else FP32_TOL if fp32 else NEAR_TIE_TOL_CUDA[kind_key])
    serial_n = a.serial_check if a.serial_check is not None else (0 if a.device == "cpu" else 64)
    logprob_tol = a.logprob_tol if a.logprob_tol is not None else (
        1e-3 if a.device == "cpu" else FP32_TOL if fp32 else gpu_logprob_tol(a.model))
    vocab = json.loads((tiny_models.model_path(a.model) / "config.json").read_text())["vocab_size"]
    tiny_models.model_path(f"dflash-{a.model}")
    items = plan(a.requests, a.seed, vocab, a.max_new_tokens)
    main = [it for it in items if it.kind not in LATE]
    late = [it for it in items if it.kind in LATE]
    chunk = max(2 * a.concurrency, math.ceil(len(main) / 10))
    for i, it in enumerate(main):
        it.chunk = i // chunk
    n_chunks = math.ceil(len(main) / chunk) if main else 0
    tally = Tally()
    for it in items:
        tally.kinds[it.kind]["planned"] += 1

    work = Path(a.workdir or a.out.parent / f"{a.out.stem}-work")
    work.mkdir(parents=True, exist_ok=True)
    oracle = work / "oracle.json"
    write_oracle_file(oracle, "first", {})
    env = {"SGLANG_DDTREE_TEST_POOL_COUNTS": "1", "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": "1",
           **dtype_env(a.model, a.device, a.dtype)}
    if a.device == "cpu":
        # Two servers on a few cores: one thread each (OpenMP threads of two processes spinning
        # against each other made every step ~20x slower on 2 cores), and no torch.compile
        # (sglang compiles its repetition penalty at first use: ~15 s of inductor build per server).
        env.update(cpu_engine_env(), OMP_NUM_THREADS="1", TORCHDYNAMO_DISABLE="1")
    spec_env = dict(env, **({"SGLANG_DDTREE_TEST_ORACLE": str(oracle)} if a.oracle == "first" else {}))
    logs = {"ddtree": work / "ddtree.log", "ref": work / "ref.log"}
    summary = {"model": a.model, "device": a.device, "dtype": "float32" if a.device == "cpu" else a.dtype, "seed": a.seed, "requests": a.requests,
               "max_new_tokens": a.max_new_tokens,
               "concurrency": a.concurrency, "budget": a.budget, "topk": a.topk, "oracle": a.oracle,
               "near_tie_tol": tol, "logprob_tol": logprob_tol, "timeout_s": a.timeout_s, "workdir": str(work)}

    args = {name: server_args(a.model, a.device, name == "ddtree", a.budget, a.topk, a.concurrency,
                              a.extra_server_arg, a.dtype) for name in ("ddtree", "ref")}
    summary["server_args"] = args
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(2) as starter:
        starts = {name: starter.submit(stack.enter_context, http_server(
            args[name], logs[name], spec_env if name == "ddtree" else env, a.startup_timeout_s))
            for name in ("ddtree", "ref")}
        try:
            servers = {k: f.result() for k, f in starts.items()}
        except ServerStartError as e:
            summary.update(passed=False, error=f"a server did not start: {e}", duration_s=round(time.time() - t0, 1))
            return summary
        summary["startup_s"] = round(time.time() - t0, 1)
        deadline = time.time() + a.timeout_s
        ref_base, spec_base = servers["ref"][0], servers["ddtree"][0]
        _SERVERS.extend(proc for _, proc in servers.values())
        if any("pool_counts" not in _info(base) for base, _ in servers.values()):
            summary.update(passed=False, error="no pool_counts in /server_info (the test plugin's "
                                               "SGLANG_DDTREE_TEST_POOL_COUNTS hook is not applied)")
            return summary

        refs: dict = {}
        conts: dict = {}
        timeline = summary["timeline"] = {"servers_up_s": summary["startup_s"]}
        ready = [threading.Event() for _ in range(n_chunks)]
        ready_late = threading.Event()
        local = threading.local()
        crng = random.Random(a.seed + 1)  # where the oracle's continuations are cut

        def session():
            # No keep-alive: a pooled connection the server closed while its thread waited for a
            # chunk of the pipeline is reset on reuse (a client race, not a server failure).
            if not hasattr(local, "s"):
                local.s = requests.Session()
                local.s.headers["Connection"] = "close"
            return local.s

        def ref_one(it: Item):
            if time.time() > deadline:
                return
            t = time.time()
            try:
                refs[it.index] = send(ref_base, it, session(), a.request_timeout_s, True, tol)
                tally.add(it, "ok", ref=True, seconds=time.time() - t)
            except Exception as e:  # (one request's failure is counted, never the soak's end)
                tally.add(it, "failed", _why(e), ref=True, seconds=time.time() - t)

        def learn(it: Item):
            r = refs.get(it.index)
            if r is None:
                return
            if it.path == "/generate":
                key, cont = it.prompt, r["output_ids"]
            else:
                key, cont = r["choices"][0].get("prompt_token_ids"), _choice_ids(r["choices"][0])
            if key and cont is not None:
                cut = len(cont) if crng.random() < 0.6 else crng.randint(0, len(cont))
                conts[tuple(key)] = cont[:cut]

        def ref_stage():
            try:
                with ThreadPoolExecutor(a.concurrency) as pool:
                    for c in range(n_chunks):
                        mine = [it for it in main if it.chunk == c and it.kind in COMPARED]
                        list(pool.map(ref_one, mine))
                        for it in mine:
                            learn(it)
                        if a.oracle == "first":
                            write_oracle_file(oracle, "first", conts)
                        ready[c].set()
                    timeline["ref_main_done_s"] = round(time.time() - t0, 1)
                    if late and wait_idle(ref_base, a.idle_timeout_s) is not None:
                        list(pool.map(ref_one, late))
                    timeline["ref_late_done_s"] = round(time.time() - t0, 1)
            finally:
                for e in ready:
                    e.set()
                ready_late.set()

        def spec_one(it: Item):
            ready[it.chunk].wait() if it.kind not in LATE else ready_late.wait()
            if time.time() > deadline:
                return
            t = time.time()
            try:
                got = send(spec_base, it, session(), a.request_timeout_s, False, tol)
            except Exception as e:
                tally.add(it, "failed", _why(e), seconds=time.time() - t)
                return
            t = time.time() - t
            try:
                status, detail = check(it, got, refs.get(it.index), tol, logprob_tol, tokenizer, rescore)
            except Exception as e:  # a malformed answer
                status, detail = "failed", "check: " + _why(e)
            tally.add(it, status, detail, seconds=t)

        def rescore(ids: list, want: list) -> tuple:
            out = _post(session(), ref_base, "/generate",
                        {"input_ids": ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
                         "return_logprob": True, "token_ids_logprob": want}, a.request_timeout_s)
            (entries,) = out["meta_info"]["output_token_ids_logprobs"]
            return out["output_ids"][0], {e[1]: e[0] for e in entries}

        tok_cache = []

        def tokenizer():
            if not tok_cache:
                from transformers import AutoTokenizer

                tok_cache.append(AutoTokenizer.from_pretrained(str(tiny_models.model_path(a.model))))
            return tok_cache[0]

        t_soak = time.time()
        ref_thread = threading.Thread(target=ref_stage, daemon=True)
        ref_thread.start()
        with ThreadPoolExecutor(a.concurrency) as pool:
            list(pool.map(spec_one, main))
            timeline["ddtree_main_done_s"] = round(time.time() - t0, 1)
            if late:
                ready_late.wait()
                if wait_idle(spec_base, a.idle_timeout_s) is not None:
                    list(pool.map(spec_one, late))
                timeline["ddtree_late_done_s"] = round(time.time() - t0, 1)
        ref_thread.join()
        soak_s = time.time() - t_soak
        if serial_n:
            summary["serial"] = serial_check(
                [it for it in main if it.kind == "greedy" and it.index in refs][:serial_n], refs,
                ref_base, spec_base, a.request_timeout_s, tol)
            timeline["serial_done_s"] = round(time.time() - t0, 1)

        with ThreadPoolExecutor(2) as pool:  # both servers at once
            futs = {name: pool.submit(final_check, *servers[name], logs[name], a.idle_timeout_s)
                    for name in ("ddtree", "ref")}
            checks = {name: f.result() for name, f in futs.items()}
        timeline["checked_s"] = round(time.time() - t0, 1)
        try:
            st = _info(spec_base)
            summary["accept"] = {"avg_spec_accept_length": st.get("avg_spec_accept_length"),
                                 "ddtree": {k: v for k, v in (st.get("ddtree") or {}).items()
                                            if k in ("steps", "request_steps", "avg_accept_length",
                                                     "accept_length_histogram", "verify_cuda_graph_steps")}}
        except (OSError, ValueError, KeyError) as e:
            summary["accept"] = {"error": repr(e)}
        _stop_servers()  # both at once (each takes seconds to exit); http_server then reaps them

    sent = sum(k["sent"] for k in tally.kinds.values())
    ref_sent = sum(k["ref_sent"] for k in tally.kinds.values())
    planned_ref = sum(1 for it in items if it.kind in COMPARED)
    n_fail = sum(k["failed"] + k["ref_failed"] for k in tally.kinds.values())
    n_mis = sum(k["mismatch"] for k in tally.kinds.values())
    n_noref = sum(k["no_reference"] for k in tally.kinds.values())
    refusals = tally.kinds["refusal"]
    summary.update(
        kinds=tally.kinds, sent={"ddtree": sent, "ref": ref_sent},
        complete=sent == len(items) and ref_sent == planned_ref,
        failures=n_fail, mismatches=n_mis, near_tie_cuts=len(tally.near_ties), no_reference=n_noref,
        refusals={"planned": refusals["planned"], "sent": refusals["sent"],
                  "refused": refusals["outcomes"].get("refused", 0)},
        failure_details=tally.failures[:50], mismatch_details=tally.mismatches[:50],
        near_tie_details=tally.near_ties[:50], servers=checks,
        soak_s=round(soak_s, 1), duration_s=round(time.time() - t0, 1),
        requests_per_s=round((sent + ref_sent) / soak_s, 2) if soak_s > 0 else None,
        ddtree_requests_per_s=round(sent / soak_s, 2) if soak_s > 0 else None,
    )
    serial_bad = (summary.get("serial") or {}).get("ddtree_vs_ref", {}).get("mismatch", 0) + \
        (summary.get("serial") or {}).get("failed", 0)
    summary["passed"] = bool(n_fail == 0 and n_mis == 0 and serial_bad == 0 and all(c["ok"] for c in checks.values()))
    return summary


def summary_line(s: dict) -> str:
    """One line: verdict, requests sent, duration, failures, mismatches, leaks, refusals,
    aborts and accept length."""
    if "kinds" not in s:
        return f"soak {s['model']} ({s['device']}): FAIL: {s.get('error', '')[:300]}"
    k = s["kinds"]
    leaks = {n: c["leaks"] for n, c in s["servers"].items() if c["leaks"]}
    dead = [n for n, c in s["servers"].items() if not c["alive"]]
    acc = (s.get("accept") or {}).get("avg_spec_accept_length")
    return (f"soak {s['model']} ({s['device']}): {'PASS' if s['passed'] else 'FAIL'} "
            f"{s['sent']['ddtree']}/{s['requests']} requests to DDTREE (+{s['sent']['ref']} to the reference) "
            f"in {s['soak_s']} s ({s['ddtree_requests_per_s']} req/s; {s['duration_s']} s in all)"
            f"{'' if s['complete'] else ', INCOMPLETE (--timeout-s)'}; failures {s['failures']}, "
            f"mismatches {s['mismatches']}, near-tie cuts {s['near_tie_cuts']}, leaks {leaks or 0}, "
            f"dead servers {dead or 0}, log errors {sum(len(c['log_errors']) for c in s['servers'].values())}; "
            f"refusals {s['refusals']['refused']}/{s['refusals']['sent']}, "
            f"aborts {k['abort']['outcomes']}, disconnects {k['disconnect']['outcomes']}; "
            f"accept length {acc if acc is None else round(acc, 2)}{_serial_line(s.get('serial'))}")


def _serial_line(serial: Optional[dict]) -> str:
    if not serial:
        return ""
    parts = [f"{name} {t['equal']}/{t['near_tie']}/{t['mismatch']}"
             for name, t in serial.items() if isinstance(t, dict) and "equal" in t]
    return f"; serial ({serial['items']}, equal/near-tie/mismatch): " + ", ".join(parts) + \
        (f", failed {serial['failed']}" if serial["failed"] else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=MODELS, default="llama", help="tiny target (its tiny DFlash drafter)")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=32, help="requests in flight per server at most")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True, help="the JSON summary")
    ap.add_argument("--workdir", type=Path, help="server logs and the oracle file (default: beside --out)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--timeout-s", type=float, default=3600.0,
                    help="stop sending this long after both servers are up (the leak check still runs)")
    ap.add_argument("--startup-timeout-s", type=float, default=600.0)
    ap.add_argument("--request-timeout-s", type=float, default=300.0)
    ap.add_argument("--idle-timeout-s", type=float, default=120.0, help="how long a server may take to go idle")
    ap.add_argument("--max-new-tokens", type=int, default=96,
                    help="the longest generation of a request that is not aborted or disconnected")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--topk", type=int, default=4)
    ap.add_argument("--oracle", choices=("first", "none"), default="first",
                    help="DDTREE drafts from the reference's outputs (first) or its own drafter (none)")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                    help="both servers' --dtype on cuda (cpu: float32 always)")
    ap.add_argument("--near-tie-tol", type=float,
                    help="default: 0 on cpu; on cuda FP32_TOL in float32, else NEAR_TIE_TOL_CUDA of the model's kind")
    ap.add_argument("--serial-check", type=int,
                    help="greedy requests sent again one at a time to both servers after the load "
                         "(default: 0 on cpu, 64 on cuda)")
    ap.add_argument("--logprob-tol", type=float,
                    help="default: 1e-3 on cpu; on cuda FP32_TOL in float32, else gpu_cases.LOGPROB_TOL of the model's kind")
    ap.add_argument("--extra-server-arg", action="append", default=[],
                    help="one more launch_server argument for both servers (repeatable; "
                         "--extra-server-arg=--flag for one starting with a dash)")
    a = ap.parse_args(argv)
    try:
        plan(a.requests, a.seed, 512)
    except ValueError as e:
        ap.error(str(e))
    if a.oracle == "first" and a.topk < 3:
        ap.error("--oracle first needs --topk >= 3 (the oracle drafter's candidates)")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_sigterm)
    s = run(a)
    a.out.write_text(json.dumps(s, indent=1))
    print(summary_line(s), flush=True)
    return 0 if s["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
