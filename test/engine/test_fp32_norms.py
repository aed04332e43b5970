"""The test plugin's float32 route for sglang's norms and rope (testing/fp32_norms.py): float32
inputs take sglang's native path, every other dtype (and a rope call with the fused KV write) the
original CUDA kernel; the targets resolve on the installed release and the plugin installs them
only when SGLANG_DDTREE_TEST_FP32_NORMS is set."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import pytest
import torch

from sglang_ddtree.testing import fp32_norms


def _norm(hidden=64, gemma=True):
    from sglang.srt.layers.layernorm import GemmaRMSNorm, RMSNorm

    n = (GemmaRMSNorm if gemma else RMSNorm)(hidden, eps=1e-6)
    with torch.no_grad():
        n.weight.copy_(torch.randn(hidden, generator=torch.Generator().manual_seed(1)))
    return n


def _never(*args, **kwargs):
    raise AssertionError("the original kernel ran for a float32 input")


def _reference(x, w, eps, residual=None, gemma=True):
    x64 = x.double() + (residual.double() if residual is not None else 0)
    y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * ((1 + w.double()) if gemma else w.double())
    return y, x64


@pytest.mark.parametrize("target", fp32_norms.TARGETS)
def test_the_targets_resolve_on_the_installed_release(target):
    if target == fp32_norms.GDN_PREFILL and os.environ.get("SGLANG_USE_CPU_ENGINE") == "1":
        pytest.skip("sglang's Triton GatedDeltaNet kernel module imports sgl_kernel's CUDA build: "
                    "not on the CPU engine (the GPU soak resolves it)")
    obj_path, attr = target.rsplit(".", 1)
    assert callable(getattr(pkgutil.resolve_name(obj_path), attr))


def test_each_target_gets_its_hook_once():
    hooks = dict(fp32_norms.HOOKS)
    assert len(hooks) == len(fp32_norms.HOOKS) == 4
    assert all(hooks[t] is fp32_norms.forward_cuda for t in fp32_norms.NORMS)
    assert hooks[fp32_norms.ROPE] is fp32_norms.rope_forward_cuda
    assert hooks[fp32_norms.GDN_PREFILL] is fp32_norms.gdn_prefill_extend


def test_float32_gdn_prefill_runs_the_chunked_kernel_in_bf16():
    """sglang's chunked GatedDeltaNet prefill refuses float32: q, k, v and beta reach it in bf16
    (g as given), its output comes back float32, the rest of its result untouched; keyword
    arguments (the state pool and indices) pass through."""
    seen = []

    def original(self, q, k, v, g, beta, **kwargs):
        seen.append((q, k, v, g, beta, kwargs))
        return q.double().sum(-1, keepdim=True).expand_as(v).to(q.dtype), "final", "h"

    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 7, 2, 8, generator=gen) for _ in range(3))
    g, beta = torch.randn(1, 7, 2, generator=gen), torch.rand(1, 7, 2, generator=gen)
    o, final, h = fp32_norms.gdn_prefill_extend(original, "kernel", q, k, v, g, beta, ssm_states="pool",
                                                cache_indices="idx")
    sq, sk, sv, sg, sb, kw = seen.pop()
    assert (sq.dtype, sk.dtype, sv.dtype, sb.dtype) == (torch.bfloat16,) * 4 and sg is g
    assert torch.equal(sq, q.to(torch.bfloat16)) and torch.equal(sb, beta.to(torch.bfloat16))
    assert kw == {"ssm_states": "pool", "cache_indices": "idx"} and (final, h) == ("final", "h")
    assert o.dtype == torch.float32 and torch.equal(o, q.to(torch.bfloat16).double().sum(-1, keepdim=True)
                                                    .expand_as(v).to(torch.bfloat16).float())
    qb = q.to(torch.bfloat16)
    assert fp32_norms.gdn_prefill_extend(original, "kernel", qb, qb, qb, g, beta)[1:] == ("final", "h")
    assert seen.pop()[0] is qb  # other dtypes: the original, untouched


@pytest.mark.parametrize("gemma", [True, False])
@pytest.mark.parametrize("with_residual", [False, True])
def test_float32_takes_the_native_path(with_residual, gemma):
    n = _norm(gemma=gemma)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 64, generator=g)
    res = torch.randn(5, 64, generator=g) if with_residual else None
    ref, ref_res = _reference(x, n.weight.data, n.variance_epsilon, res, gemma)
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


def _rope(monkeypatch):
    import types

    from sglang.srt.layers.rotary_embedding import base

    bag = types.SimpleNamespace(deterministic=types.SimpleNamespace(rl_on_policy_target=None))
    monkeypatch.setattr(base, "get_exec", lambda: bag)
    return base.RotaryEmbedding(16, 16, 64, 10000, True, torch.float32)


def _rope_reference(positions, x, heads, base=10000.0, dim=16):
    """Neox-style rotation of ``x`` ``[tokens, heads * dim]`` in float64."""
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    ang = positions.double()[:, None] * inv[None]
    cos, sin = ang.cos()[:, None], ang.sin()[:, None]
    x = x.double().view(len(positions), heads, dim)
    a, b = x[..., : dim // 2], x[..., dim // 2:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), -1).reshape(len(positions), heads * dim)


def test_float32_rope_takes_the_native_path(monkeypatch):
    r = _rope(monkeypatch)
    g = torch.Generator().manual_seed(3)
    pos = torch.tensor([0, 3, 7, 63])
    q, k = torch.randn(4, 2 * 16, generator=g), torch.randn(4, 16, generator=g)
    q2, k2 = fp32_norms.rope_forward_cuda(_never, r, pos, q.clone(), k.clone())
    assert q2.dtype == k2.dtype == torch.float32 and not (q2.isnan().any() or k2.isnan().any())
    torch.testing.assert_close(q2.double(), _rope_reference(pos, q, 2), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k2.double(), _rope_reference(pos, k, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["bf16", "fused_kv_write"])
def test_rope_runs_the_original_otherwise(case, monkeypatch):
    r = _rope(monkeypatch)
    pos = torch.tensor([1, 2])
    dtype = torch.bfloat16 if case == "bf16" else torch.float32
    q, k = torch.randn(2, 16).to(dtype), torch.randn(2, 16).to(dtype)
    fused = object() if case == "fused_kv_write" else None
    seen = []

    def original(self, positions, query, key, offsets=None, fused_set_kv_buffer_arg=None):
        seen.append((self, query.dtype, fused_set_kv_buffer_arg))
        return "kernel"

    assert fp32_norms.rope_forward_cuda(original, r, pos, q, k, None, fused) == "kernel"
    assert seen == [(r, dtype, fused)]


@pytest.mark.parametrize("value", ["1", None])
def test_the_plugin_installs_it_only_when_asked(value):
    code = (
        "from sglang.srt.plugins.hook_registry import HookRegistry\n"
        "from sglang_ddtree.testing import plugin, fp32_norms\n"
        "plugin.register()\n"
        "print(sum(any(h is hook for _, h, _ in HookRegistry._hooks.get(t, [])) for t, hook in fp32_norms.HOOKS))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_DDTREE_TEST_")}
    if value is not None:
        env["SGLANG_DDTREE_TEST_FP32_NORMS"] = value
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == (str(len(fp32_norms.TARGETS)) if value else "0")
