"""DDTREE step statistics: accept-length and depth-reached histograms, tree size.

The worker records every step into device-side counters (no host sync on the decode path);
they are read only when asked:

- ``/server_info`` (``get_server_info()``): ``internal_states[i]["ddtree"]`` is
  :meth:`DDTreeStats.snapshot`;
- the Prometheus endpoint (``--enable-metrics``): ``sglang:ddtree_accept_length`` (histogram of
  accepted drafts per request-step, buckets 0..L), ``sglang:ddtree_depth_reached`` (histogram of
  the deepest tree level built per request-step) and ``sglang:ddtree_tree_nodes_avg``, exported
  every ``--decode-log-interval`` decode steps with sglang's own metric labels.

The hooks that publish them are in ``compat/metrics_hooks.py``.

Per request, sglang's own ``meta_info`` fields carry the accept statistics
(``spec_accept_length``, ``spec_correct_drafts_histogram``).
"""

from __future__ import annotations

import torch


class DDTreeStats:
    """Counters over request-steps (one request in one DDTREE step)."""

    def __init__(self, budget: int, max_depth: int, device, shadow: bool = False):
        self.budget = int(budget)
        self.max_depth = int(max_depth)
        self.shadow = bool(shadow)
        # --speculative-ddtree-shadow-linear: what the DFLASH chain would have accepted.
        self.shadow_hist = torch.zeros(self.max_depth + 1, dtype=torch.int64, device=device)
        self.shadow_censored = torch.zeros((), dtype=torch.int64, device=device)
        self.accept_hist = torch.zeros(self.max_depth + 1, dtype=torch.int64, device=device)
        self.depth_hist = torch.zeros(self.max_depth + 1, dtype=torch.int64, device=device)
        self.nodes = torch.zeros((), dtype=torch.int64, device=device)
        self.batch_steps = 0  # host-side count of DDTREE steps (batches)
        self.verify_graph_steps = 0  # steps whose target verify replayed a CUDA graph
        # --speculative-ddtree-oracle-rate: request-steps replayed, and those that disagreed.
        self.oracle_checked = torch.zeros((), dtype=torch.int64, device=device)
        self.oracle_mismatch = torch.zeros((), dtype=torch.int64, device=device)
        self.oracle_steps = 0
        self.oracle_skipped = 0  # steps with no free KV slots for the replay
        # --speculative-ddtree-budget auto: the policy (core/budget_policy.py) and its choices.
        self.policy = None
        self.choices = {}
        # SGLANG_DDTREE_PHASE_TIMING (developer): debug_log.PhaseEvents of the worker's steps.
        self.phase_events = None
        # SGLANG_DDTREE_SYNC_CHECK (developer): debug_log.SyncWatch of the worker's steps.
        self.sync_watch = None

    def record_choice(self, choice) -> None:
        self.choices[str(choice)] = self.choices.get(str(choice), 0) + 1

    def record(self, accept_len: torch.Tensor, tree_depth: torch.Tensor) -> None:
        """``accept_len [bs]`` accepted drafts; ``tree_depth [bs, B']`` node depths (<= 0: none)."""
        ones = torch.ones_like(accept_len, dtype=torch.int64)
        self.accept_hist.index_add_(0, accept_len.long().clamp(0, self.max_depth), ones)
        reached = tree_depth.long().clamp(min=0).amax(dim=1).clamp(max=self.max_depth)
        self.depth_hist.index_add_(0, reached, ones)
        self.nodes += (tree_depth > 0).sum()
        self.batch_steps += 1

    def record_shadow(self, chain_accept: torch.Tensor, censored: torch.Tensor) -> None:
        """``chain_accept [bs]`` (core/shadow_chain.py), ``censored [bs]``: lower bounds."""
        ones = torch.ones_like(chain_accept, dtype=torch.int64)
        self.shadow_hist.index_add_(0, chain_accept.long().clamp(0, self.max_depth), ones)
        self.shadow_censored += censored.sum()

    def record_oracle(self, checked: torch.Tensor, mismatch: torch.Tensor) -> None:
        """``checked [bs]`` rows replayed (greedy), ``mismatch [bs]`` rows that disagreed."""
        self.oracle_checked += checked.sum()
        self.oracle_mismatch += mismatch.sum()
        self.oracle_steps += 1

    def snapshot(self) -> dict:
        """Host copy (one device read): what /server_info reports."""
        acc = self.accept_hist.tolist()
        n = sum(acc)
        out = {
            "budget": self.budget,
            "max_depth": self.max_depth,
            "steps": self.batch_steps,
            "request_steps": n,
            "accept_length_histogram": acc,
            # tokens committed per request-step: accepted drafts + the bonus token
            "avg_accept_length": (sum(i * c for i, c in enumerate(acc)) + n) / n if n else 0.0,
            "depth_reached_histogram": self.depth_hist.tolist(),
            "avg_tree_nodes": int(self.nodes) / n if n else 0.0,
            "verify_cuda_graph_steps": self.verify_graph_steps,
        }
        if self.policy is not None:
            out["budget_policy"] = dict(self.policy.snapshot(), steps_by_choice=dict(self.choices))
        if self.phase_events is not None:
            out["phase_timing"] = self.phase_events.snapshot()
        if self.sync_watch is not None:
            out["host_syncs"] = dict(self.sync_watch.sites)
        if self.oracle_steps or self.oracle_skipped:
            out["oracle"] = {"steps": self.oracle_steps, "skipped_steps": self.oracle_skipped,
                             "checked_request_steps": int(self.oracle_checked),
                             "mismatched_request_steps": int(self.oracle_mismatch)}
        routed = _skinny_routed()
        if routed is not None:
            out["skinny_gemm_routed"] = routed
        if self.shadow:
            sh = self.shadow_hist.tolist()
            m = sum(sh)
            out["shadow_chain"] = {
                "accept_length_histogram": sh,
                "avg_accept_length": (sum(i * c for i, c in enumerate(sh)) + m) / m if m else 0.0,
                # request-steps where the chain's count is a lower bound (the tree did not
                # contain the node that would have told how much more it accepts)
                "censored_request_steps": int(self.shadow_censored),
            }
        return out


class PrometheusExport:
    """Pushes the counters' increments into prometheus_client metrics (scheduler process)."""

    def __init__(self, stats: DDTreeStats, labels: dict):
        from prometheus_client import Gauge, Histogram

        names = list(labels)
        buckets = [float(i) for i in range(stats.max_depth + 1)]
        self.labels = labels
        self.accept = Histogram("sglang:ddtree_accept_length", "DDTREE accepted drafts per request-step.",
                                labelnames=names, buckets=buckets)
        self.depth = Histogram("sglang:ddtree_depth_reached", "DDTREE deepest draft-tree level per request-step.",
                               labelnames=names, buckets=buckets)
        self.shadow = None
        if stats.shadow:
            self.shadow = Histogram("sglang:ddtree_shadow_chain_accept_length",
                                    "DFLASH-chain accepted drafts per request-step, computed alongside DDTREE "
                                    "(--speculative-ddtree-shadow-linear; censored steps count their lower bound).",
                                    labelnames=names, buckets=buckets)
        self._sh = [0] * (stats.max_depth + 1)
        self.nodes = Gauge("sglang:ddtree_tree_nodes_avg", "DDTREE average draft-tree nodes per request-step.",
                           labelnames=names, multiprocess_mode="mostrecent")
        self.stats = stats
        self._acc = [0] * (stats.max_depth + 1)
        self._dep = [0] * (stats.max_depth + 1)

    def export(self) -> None:
        snap = self.stats.snapshot()
        pairs = [(self.accept, self._acc, snap["accept_length_histogram"]),
                 (self.depth, self._dep, snap["depth_reached_histogram"])]
        if self.shadow is not None:
            pairs.append((self.shadow, self._sh, snap["shadow_chain"]["accept_length_histogram"]))
        for hist, last, new in pairs:
            h = hist.labels(**self.labels)
            for value, (before, now) in enumerate(zip(last, new)):
                for _ in range(now - before):
                    h.observe(value)
                last[value] = now
        self.nodes.labels(**self.labels).set(snap["avg_tree_nodes"])


def _skinny_routed():
    """Where this process serves with a few-token GEMM table (``--speculative-ddtree-gemm-table``):
    ``[[tokens, N, K, act, tiling], ...]``, the products it sent to ``kernels/skinny_gemm.py``
    (``compat/skinny_linear.routed``); else None."""
    from .compat.skinny_linear import active, routed

    if not active():
        return None

    return sorted(([m, n, k, act, cfg.name()] for (m, n, k, act), cfg in routed().items()), key=str)


def request_spec_metrics(meta_info: dict, budget: int) -> None:
    """Per-request meta_info for DDTREE, in place: sglang counts ``verify_ct * (num_draft_tokens
    - 1)`` proposed drafts, i.e. the verify width minus one; a DDTREE step proposes the tree's
    ``budget`` nodes. Also reports the tree size per step as ``ddtree_tree_nodes`` (the accepted
    depth per step is sglang's ``spec_accept_histogram``)."""
    verify_ct = meta_info.get("spec_verify_ct")
    if not verify_ct:
        return
    proposed = int(verify_ct) * int(budget)
    correct = meta_info.get("spec_num_correct_drafts", 0)
    meta_info["spec_num_proposed_drafts"] = meta_info["spec_proposed_drafts"] = proposed
    meta_info["spec_accept_rate"] = correct / proposed if proposed else 0.0
    meta_info["ddtree_tree_nodes"] = int(budget)
