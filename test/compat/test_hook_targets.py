"""Every HookRegistry target the plugin registers resolves against the pinned sglang.

HookRegistry only logs a target it cannot resolve, so a renamed upstream class would silently
switch a hook off (this caught ``MetricsReporter`` -> ``SchedulerMetricsReporter``)."""

from __future__ import annotations

import pkgutil

import pytest


def _our_targets():
    from sglang.srt.plugins.hook_registry import HookRegistry

    from sglang_ddtree import plugin

    plugin.register()  # the CPU hooks too when SGLANG_USE_CPU_ENGINE=1 (as in CI)
    return sorted(
        t for t, hooks in HookRegistry._hooks.items()
        if any(getattr(h, "__module__", "").startswith("sglang_ddtree") for _, h, _ in hooks)
    )


TARGETS = _our_targets()


def test_the_plugin_registers_hooks():
    assert len(TARGETS) >= 10, TARGETS


@pytest.mark.parametrize("target", TARGETS)
def test_hook_target_resolves(target):
    obj_path, attr = target.rsplit(".", 1)
    obj = pkgutil.resolve_name(obj_path)
    assert hasattr(obj, attr), f"{target}: {obj_path} has no attribute {attr}"


def test_at_most_one_around_hook_of_ours_per_target():
    """sglang's HookRegistry warns on every target with several AROUND hooks (an earlier server
    logs showed it for ModelRunner.init_cuda_graphs): ours are composed into one per target
    (compat/graph_init.py), so a DDTREE server log carries no such warning of ours."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    # Distinct functions: a test that registers one of ours again (test_conv_windows) is not
    # what a server does (plugin.register runs once).
    many = {t: n for t, hooks in HookRegistry._hooks.items()
            if (n := len({h for ht, h, _ in hooks
                          if ht == HookType.AROUND and getattr(h, "__module__", "").startswith("sglang_ddtree")})) > 1}
    assert not many, many
