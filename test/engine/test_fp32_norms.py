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


def _recurrence64(q, k, v, g, beta, S0, scale):
    """Ground truth of one sequence, token by token in float64: q, k [L, H, K], v [L, HV, V],
    g, beta [L, HV], S0 [HV, K, V]. Returns (o [L, HV, V], S [HV, K, V])."""
    r = v.shape[1] // q.shape[1]
    qn = torch.nn.functional.normalize(q.double(), dim=-1, eps=0).repeat_interleave(r, 1) * scale
    kn = torch.nn.functional.normalize(k.double(), dim=-1, eps=0).repeat_interleave(r, 1)
    S, out = S0.double().clone(), []
    for t in range(q.shape[0]):
        a = torch.exp(g[t].double()).view(-1, 1, 1)
        S = a * S
        err = v[t].double() - torch.einsum("hkv,hk->hv", S, kn[t])
        S = S + beta[t].double().view(-1, 1, 1) * torch.einsum("hk,hv->hkv", kn[t], err)
        out.append(torch.einsum("hkv,hk->hv", S, qn[t]))
    return (torch.stack(out) if out else v.double()), S


@pytest.mark.parametrize("lens", [(1,), (5, 64, 0, 130), (200, 3)])
def test_float32_gdn_prefill_matches_the_float64_recurrence(lens):
    """The float32 route's prefill (testing/gdn_prefill_fp32.py) on fresh random varlen inputs:
    outputs and the final states written into each sequence's pool slot equal a float64
    token-by-token recurrence (tolerance 2e-4 relative to each tensor's largest entry, float32
    over up to 200 tokens and several chunks); slots not named stay bit-identical; no NaN."""
    from sglang_ddtree.testing.gdn_prefill_fp32 import chunk_gdn_prefill

    gen = torch.Generator().manual_seed(sum(lens) + len(lens))
    H, HV, K, V, T = 2, 6, 16, 8, sum(lens)
    q, k = (torch.randn(1, T, H, K, generator=gen) for _ in range(2))
    v = torch.randn(1, T, HV, V, generator=gen)
    g = -torch.nn.functional.softplus(torch.randn(1, T, HV, generator=gen)) * 0.3
    beta = torch.rand(1, T, HV, generator=gen)
    pool = torch.randn(len(lens) + 3, HV, V, K, generator=gen)
    slots = torch.randperm(pool.shape[0], generator=gen)[:len(lens)]
    before = pool.clone()
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()])
    o = chunk_gdn_prefill(q, k, v, g, beta, pool, slots, cu)
    assert o.shape == (1, T, HV, V) and o.dtype == torch.float32 and not o.isnan().any()
    for i, n in enumerate(lens):
        s, e = int(cu[i]), int(cu[i + 1])
        ref_o, ref_S = _recurrence64(q[0, s:e], k[0, s:e], v[0, s:e], g[0, s:e], beta[0, s:e],
                                     before[slots[i]].transpose(-1, -2), K ** -0.5)
        got_S = pool[slots[i]].transpose(-1, -2).double()
        assert (got_S - ref_S).abs().max() <= 2e-4 * ref_S.abs().max()
        if n:
            assert (o[0, s:e].double() - ref_o).abs().max() <= 2e-4 * ref_o.abs().max()
    others = [i for i in range(pool.shape[0]) if i not in slots.tolist()]
    assert torch.equal(pool[others], before[others])


def test_float32_gdn_prefill_refuses_bad_indices():
    from sglang_ddtree.testing.gdn_prefill_fp32 import chunk_gdn_prefill

    q = torch.randn(1, 4, 1, 4)
    v, g = torch.randn(1, 4, 2, 4), torch.zeros(1, 4, 2)
    pool = torch.zeros(3, 2, 4, 4)
    with pytest.raises(ValueError, match="distinct slots"):
        chunk_gdn_prefill(q, q, v, g, g, pool, torch.tensor([1, 1]), torch.tensor([0, 2, 4]))
    with pytest.raises(ValueError, match="cu_seqlens"):
        chunk_gdn_prefill(q, q, v, g, g, pool, torch.tensor([0]), torch.tensor([0, 3]))


def test_float32_gdn_prefill_hook_dispatch():
    """float32 goes to the torch prefill (the original never runs; the pool keywords are used and
    the result is ``(o, None, None)``); state checkpoints are refused by name; other dtypes run the
    original untouched."""
    from sglang_ddtree.testing.gdn_prefill_fp32 import chunk_gdn_prefill

    gen = torch.Generator().manual_seed(2)
    q, k = (torch.randn(1, 7, 2, 8, generator=gen) for _ in range(2))
    v = torch.randn(1, 7, 4, 8, generator=gen)
    g, beta = -torch.rand(1, 7, 4, generator=gen), torch.rand(1, 7, 4, generator=gen)
    pool = torch.randn(2, 4, 8, 8, generator=gen)
    kw = dict(ssm_states=pool.clone(), cache_indices=torch.tensor([1]), query_start_loc=torch.tensor([0, 7]))
    o, final, h = fp32_norms.gdn_prefill_extend(_never, "kernel", q, k, v, g, beta, **kw, num_state_checkpoints=0)
    want_pool = pool.clone()
    want = chunk_gdn_prefill(q, k, v, g, beta, want_pool, torch.tensor([1]), torch.tensor([0, 7]))
    assert (final, h) == (None, None) and torch.equal(o, want) and torch.equal(kw["ssm_states"], want_pool)
    with pytest.raises(NotImplementedError, match="--disable-radix-cache"):
        fp32_norms.gdn_prefill_extend(_never, "kernel", q, k, v, g, beta, **kw, num_state_checkpoints=2)
    seen = []

    def original(self, *args, **kwargs):
        seen.append(args)
        return "o", "final", "h"

    qb = q.to(torch.bfloat16)
    assert fp32_norms.gdn_prefill_extend(original, "kernel", qb, qb, qb, g, beta) == ("o", "final", "h")
    assert seen.pop()[0] is qb


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
