"""The test plugin's float32 GemmaRMSNorm route (testing/fp32_norms.py): float32 inputs take
sglang's native path, every other dtype the original CUDA kernel; the target resolves on the
installed release and the plugin installs it only when SGLANG_DDTREE_TEST_FP32_NORMS is set."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import pytest
import torch

from sglang_ddtree.testing import fp32_norms


def _norm(hidden=64):
    from sglang.srt.layers.layernorm import GemmaRMSNorm

    n = GemmaRMSNorm(hidden, eps=1e-6)
    with torch.no_grad():
        n.weight.copy_(torch.randn(hidden, generator=torch.Generator().manual_seed(1)))
    return n


def _never(*args, **kwargs):
    raise AssertionError("the original kernel ran for a float32 input")


def _reference(x, w, eps, residual=None):
    x64 = x.double() + (residual.double() if residual is not None else 0)
    y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * (1 + w.double())
    return y, x64


def test_the_target_resolves_on_the_installed_release():
    obj_path, attr = fp32_norms.TARGET.rsplit(".", 1)
    assert callable(getattr(pkgutil.resolve_name(obj_path), attr))


@pytest.mark.parametrize("with_residual", [False, True])
def test_float32_takes_the_native_path(with_residual):
    n = _norm()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 64, generator=g)
    res = torch.randn(5, 64, generator=g) if with_residual else None
    ref, ref_res = _reference(x, n.weight.data, n.variance_epsilon, res)
    out = fp32_norms.forward_cuda(_never, n, x.clone(), None if res is None else res.clone())
    if with_residual:
        out, new_res = out
        assert new_res.dtype == torch.float32
        torch.testing.assert_close(new_res.double(), ref_res, rtol=1e-6, atol=1e-6)
    assert out.dtype == torch.float32 and not out.isnan().any()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_other_dtypes_run_the_original(dtype):
    n = _norm()
    x = torch.randn(3, 64).to(dtype)
    seen = []

    def original(self, x, residual=None, post_residual_addition=None):
        seen.append((self, x.dtype, residual, post_residual_addition))
        return "kernel"

    assert fp32_norms.forward_cuda(original, n, x) == "kernel"
    assert seen == [(n, dtype, None, None)]


@pytest.mark.parametrize("value", ["1", None])
def test_the_plugin_installs_it_only_when_asked(value):
    code = (
        "from sglang.srt.plugins.hook_registry import HookRegistry\n"
        "from sglang_ddtree.testing import plugin, fp32_norms\n"
        "plugin.register()\n"
        "hooks = HookRegistry._hooks.get(fp32_norms.TARGET, [])\n"
        "print(sum(h is fp32_norms.forward_cuda for _, h, _ in hooks))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_DDTREE_TEST_")}
    if value is not None:
        env["SGLANG_DDTREE_TEST_FP32_NORMS"] = value
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == ("1" if value else "0")
