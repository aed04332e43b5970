"""DDTREE's metrics in sglang's endpoints (sglang has no seam for a speculative algorithm's own
metrics): three AFTER hooks.

- ``Scheduler.get_internal_state``: ``/server_info``'s ``internal_states[i]["ddtree"]`` is the
  worker's :meth:`~sglang_ddtree.metrics.DDTreeStats.snapshot`;
- ``SchedulerMetricsReporter.report_decode_stats``: the Prometheus export, at sglang's own
  periodic gate (``--decode-log-interval``), with sglang's metric labels;
- ``TokenizerManager._calculate_spec_decoding_metrics``: per-request ``meta_info`` counts a DDTREE
  step's proposed drafts as its tree's nodes (:func:`~sglang_ddtree.metrics.request_spec_metrics`).
"""

from __future__ import annotations

from ..metrics import PrometheusExport, request_spec_metrics
from . import releases
from ..server_args import is_ddtree


def _ddtree_worker(scheduler):
    from ..worker import DDTreeWorker  # the scheduler's worker module, imported there anyway

    w = getattr(scheduler, "draft_worker", None)
    return w if isinstance(w, DDTreeWorker) else None


def _internal_state_after(result, self, *args, **kwargs):
    worker = _ddtree_worker(self)
    if worker is not None and isinstance(getattr(result, "internal_state", None), dict):
        result.internal_state["ddtree"] = worker.stats.snapshot()
    return result


def _decode_stats_after(result, self, *args, **kwargs):
    scheduler = getattr(self, "scheduler", None)
    worker = _ddtree_worker(scheduler) if scheduler is not None else None
    if worker is None or not self.enable_metrics:
        return result
    # The reporter's own periodic gate (its log line and heavy metrics use the same one).
    if self.forward_ct_decode % self.decode_log_interval != 0:
        return result
    if worker.prometheus is None:
        worker.prometheus = PrometheusExport(worker.stats, dict(self.metrics_collector.labels))
    worker.prometheus.export()
    return result


def _request_metrics_after(result, self, meta_info, *args, **kwargs):
    sa = releases.resolved(self.server_args)
    if is_ddtree(sa):
        if getattr(sa, "speculative_ddtree_step_cost", None):
            # --speculative-ddtree-budget auto: the tree size changes per step and is not known
            # here; sglang's counts stay (verify width - 1 per step: an upper bound).
            meta_info["ddtree_budget"] = "auto"
        else:
            request_spec_metrics(meta_info, sa.speculative_ddtree_budget)
    return result


def register_metrics_hooks() -> None:
    """sglang has no seam for a speculative algorithm's own metrics: three AFTER hooks."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register("sglang.srt.managers.tokenizer_manager.TokenizerManager._calculate_spec_decoding_metrics",
                          _request_metrics_after, HookType.AFTER)

    HookRegistry.register("sglang.srt.managers.scheduler.Scheduler.get_internal_state",
                          _internal_state_after, HookType.AFTER)
    HookRegistry.register(
        "sglang.srt.managers.scheduler_components.metrics_reporter.SchedulerMetricsReporter.report_decode_stats",
        _decode_stats_after, HookType.AFTER,
    )
