"""Allocator counts of a scheduler's pools, for leak checks from outside the server.

With ``SGLANG_DDTREE_TEST_POOL_COUNTS=1`` the test plugin (``testing/plugin.py``) adds
:func:`pool_counts` of the scheduler to ``/server_info``'s ``internal_states[i]["pool_counts"]``
(an AFTER hook on ``Scheduler.get_internal_state``), on any server the plugin loads in, with or
without speculation.

Why: sglang 0.5.17's idle check (``Scheduler.on_idle``, strict with
``SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE``) asserts the KV pool and the request pool, but the
linear-attention (GatedDeltaNet / mamba) state pool only when the prefix cache supports mamba
states (``MambaRadixCache``); with ``--disable-radix-cache`` (``ChunkCache``) that pool is not
checked at all. These counts let a client assert every pool itself.
"""

from __future__ import annotations


def pool_counts(scheduler) -> dict:
    """Counts of ``scheduler``'s pools, read in the scheduler process between batches.

    Returns ``{"idle": bool, "kv": {...}, "req": {...}, "mamba": {...} (hybrid targets only),
    "sglang_check": {"leak": bool, "messages": [str]}}``: ``idle`` is sglang's
    ``is_fully_idle()``; each pool has ``available`` (free slots), ``evictable`` (held by the
    prefix cache, reclaimable; the request pool has none) and ``total``; ``sglang_check`` is
    sglang's own invariant check of its pools (``available + evictable + protected + session-held
    == total``, the mamba pool only where sglang checks it). At idle with nothing leaked, every
    pool has ``available + evictable == total``.
    """
    ps = scheduler.pool_stats_observer.get_pool_stats()
    req_pool = scheduler.req_to_token_pool
    out = {
        "idle": bool(scheduler.is_fully_idle()),
        "kv": {"available": int(ps.full_available_size), "evictable": int(ps.full_evictable_size),
               "total": int(scheduler.token_to_kv_pool_allocator.size)},
        "req": {"available": int(req_pool.available_size()), "evictable": 0, "total": int(req_pool.size)},
    }
    if ps.is_hybrid_ssm:
        out["mamba"] = {"available": int(ps.mamba_available_size), "evictable": int(ps.mamba_evictable_size),
                        "total": int(req_pool.mamba_pool.size)}
    leak, messages = scheduler.invariant_checker._check_all_pools(ps)
    out["sglang_check"] = {"leak": bool(leak), "messages": [m for m in messages if m]}
    return out


def leaked_pools(counts: dict) -> list:
    """The pools of a :func:`pool_counts` result with slots neither free nor held by the prefix
    cache (``available + evictable != total``), as ``"NAME: available+evictable/total"`` lines,
    plus sglang's own verdict if it found a leak; empty when nothing leaked."""
    bad = [f"{name}: {c['available']}+{c['evictable']}/{c['total']}" for name, c in counts.items()
           if isinstance(c, dict) and "total" in c and c["available"] + c["evictable"] != c["total"]]
    if counts["sglang_check"]["leak"]:
        bad.append("sglang's invariant check: " + "; ".join(counts["sglang_check"]["messages"]))
    return bad
