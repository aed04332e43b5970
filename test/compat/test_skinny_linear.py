"""compat/skinny_linear.py: the developer switch that sends a DDTREE server's few-token linear
layers to kernels/skinny_gemm.py where a benchmark table measured it faster than cuBLAS."""

from __future__ import annotations

import json
import pkgutil

import pytest
import torch

from sglang_ddtree.compat import skinny_linear as sl
from sglang_ddtree.kernels.skinny_gemm import Config


def _table(tmp_path, rows):
    p = tmp_path / "skinny_gemm.json"
    p.write_text(json.dumps(dict(meta={}, rows=rows)))
    return p


def test_table_keeps_rows_that_beat_cublas_by_the_margin(tmp_path):
    rows = [
        dict(m=17, n=5120, k=17408, best="bn64_bk128_sk2_st4_w4", best_vs_cublas=0.95),
        dict(m=16, n=5120, k=17408, best="bn64_bk128_sk2_st4_w4", best_vs_cublas=0.99),  # not enough
        dict(m=17, n=96, k=5120, best=None),  # no tiling measured
        dict(m=300, n=96, k=5120, best="bn64_bk128_sk1_st4_w4", best_vs_cublas=0.5),  # beyond MAX_M
        dict(m=17, n=5120, k=17408, act="silu_mul", best="bn64_bk128_sk1_st4_w4", best_vs_cublas=0.9),
    ]
    table = sl.load_table(_table(tmp_path, rows))
    assert table == {(17, 5120, 17408, None): Config(BN=64, BK=128, split_k=2, num_stages=4, num_warps=4),
                     (17, 5120, 17408, "silu_mul"): Config(BN=64, BK=128, split_k=1, num_stages=4, num_warps=4)}


@pytest.mark.parametrize("text", ["not json", json.dumps({"rows": [{"m": 1, "best": "bn64_bk64_sk1_st2_w4", "best_vs_cublas": 0.5}]}), json.dumps({"nope": []})])
def test_a_bad_table_is_refused_naming_the_variable(tmp_path, text):
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.raises(ValueError, match="SGLANG_DDTREE_SKINNY_GEMM"):
        sl.load_table(p)
    with pytest.raises(ValueError, match="SGLANG_DDTREE_SKINNY_GEMM"):
        sl.load_table(tmp_path / "missing.json")


def test_unset_switch_registers_nothing(monkeypatch):
    monkeypatch.delenv("SGLANG_DDTREE_SKINNY_GEMM", raising=False)
    assert sl.register_skinny_linear_hook() is False


def test_the_hook_target_resolves_and_falls_back_to_sglang(tmp_path, monkeypatch):
    """Registered with a table: the target exists in the installed sglang, and a product the
    table does not name (here: CPU tensors, and a shape it lacks) goes to sglang's method."""
    from sglang.srt.plugins.hook_registry import HookRegistry

    rows = [dict(m=4, n=8, k=64, best="bn64_bk64_sk1_st2_w4", best_vs_cublas=0.9)]
    monkeypatch.setenv("SGLANG_DDTREE_SKINNY_GEMM", str(_table(tmp_path, rows)))
    saved = {k: list(v) for k, v in HookRegistry._hooks.items()}
    try:
        assert sl.register_skinny_linear_hook() is True
        assert any(h is sl._apply for _, h, _ in HookRegistry._hooks[sl.TARGET])
        assert sl.MLP_TARGET not in HookRegistry._hooks  # no fused row: no MLP hook
    finally:
        HookRegistry._hooks.clear()
        HookRegistry._hooks.update(saved)
    obj_path, attr = sl.TARGET.rsplit(".", 1)
    assert hasattr(pkgutil.resolve_name(obj_path), attr)
    assert (4, 8, 64, None) in sl._TABLE

    calls = []

    def original(self, layer, x, bias=None):
        calls.append(tuple(x.shape))
        return torch.nn.functional.linear(x, layer.weight, bias)

    layer = torch.nn.Linear(64, 8, bias=False).to(torch.bfloat16)
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    y = sl._apply(original, None, layer, x)  # on CPU: not a CUDA tensor
    assert calls == [(4, 64)] and torch.equal(y, torch.nn.functional.linear(x, layer.weight))
    assert sl.tiling_for(x, layer.weight) is None
    sl._TABLE.clear()


def test_a_fused_row_registers_the_mlp_hook_whose_target_resolves(tmp_path, monkeypatch):
    """The MLP target's module (sglang's Qwen2 MoE model file, whose dense MLP Qwen3.5 uses) does
    not import on sglang's CPU engine (the CI's): resolved in a process without it."""
    import os
    import subprocess
    import sys

    from sglang.srt.plugins.hook_registry import HookRegistry

    rows = [dict(m=16, n=64, k=128, act="silu_mul", best="bn64_bk64_sk1_st2_w4", best_vs_cublas=0.9)]
    monkeypatch.setenv("SGLANG_DDTREE_SKINNY_GEMM", str(_table(tmp_path, rows)))
    saved = {k: list(v) for k, v in HookRegistry._hooks.items()}
    try:
        assert sl.register_skinny_linear_hook() is True
        assert any(h is sl._mlp_forward for _, h, _ in HookRegistry._hooks[sl.MLP_TARGET])
    finally:
        HookRegistry._hooks.clear()
        HookRegistry._hooks.update(saved)
        sl._TABLE.clear()
    mod, cls, attr = sl.MLP_TARGET.rsplit(".", 2)
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_USE_CPU_ENGINE"}
    code = f"import importlib; m = importlib.import_module({mod!r}); assert hasattr(m.{cls}, {attr!r})"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


class SiluAndMul:  # the type names the MLP hook checks
    pass


class UnquantizedLinearMethod:
    pass


class _Down(torch.nn.Module):
    """A row-parallel stand-in: its forward calls the hooked apply as sglang's does."""

    def __init__(self, k, n, calls):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5)
        self.quant_method = UnquantizedLinearMethod()
        self.calls = calls

    def forward(self, x):
        def original(method, layer, x, bias=None):
            self.calls.append("sglang")
            return torch.nn.functional.linear(x, layer.weight, bias)

        return sl._apply(original, self.quant_method, self, x), None


class _MLP(torch.nn.Module):
    def __init__(self, h, k, n, calls):
        super().__init__()
        self.up = torch.randn(2 * k, h, dtype=torch.bfloat16, device="cuda") / h ** 0.5
        self.gate_up_proj = lambda x: (torch.nn.functional.linear(x, self.up), None)
        self.act_fn = SiluAndMul()
        self.down_proj = _Down(k, n, calls)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel path needs a GPU")
def test_the_mlp_hook_forms_the_activation_inside_the_down_projection(tmp_path, monkeypatch):
    from sglang_ddtree.kernels.skinny_gemm import silu_mul_reference

    rows = [dict(m=16, n=256, k=512, act="silu_mul", best="bn64_bk128_sk1_st3_w4", best_vs_cublas=0.9)]
    sl._TABLE.clear()
    sl._TABLE.update(sl.load_table(_table(tmp_path, rows)))
    monkeypatch.setattr(sl, "_serving_ddtree", lambda: True)
    calls = []
    mlp = _MLP(128, 512, 256, calls)
    x = torch.randn(16, 128, device="cuda", dtype=torch.bfloat16)
    y = sl._mlp_forward(lambda *a: calls.append("original"), mlp, x)
    assert calls == []  # neither sglang's MLP forward nor its product
    h = silu_mul_reference(mlp.gate_up_proj(x)[0].cpu())
    want = h.double() @ mlp.down_proj.weight.double().cpu().T
    assert ((y.double().cpu() - want).abs().max() / want.abs().max()).item() < 1e-2
    assert sl._FUSED_LAYER.get() is None  # reset after the call
    sl._mlp_forward(lambda *a: calls.append("original"), mlp, x[:15])  # 15 tokens: not in the table
    assert calls == ["original"]
    sl._TABLE.clear()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel path needs a GPU")
def test_a_named_product_runs_the_kernel_on_a_ddtree_server(tmp_path, monkeypatch):
    rows = [dict(m=17, n=256, k=512, best="bn64_bk128_sk2_st3_w4", best_vs_cublas=0.9)]
    sl._TABLE.clear()
    sl._ROUTED.clear()
    sl._TABLE.update(sl.load_table(_table(tmp_path, rows)))
    monkeypatch.setattr(sl, "_serving_ddtree", lambda: True)
    layer = torch.nn.Linear(512, 256, bias=True).to("cuda", torch.bfloat16)
    x = torch.randn(17, 512, device="cuda", dtype=torch.bfloat16)
    calls = []
    y = sl._apply(lambda *a: calls.append(a), None, layer, x, layer.bias)
    assert calls == []
    assert sl.routed() == {(17, 256, 512, None): sl.Config.from_name("bn64_bk128_sk2_st3_w4")}
    want = (x.double() @ layer.weight.double().T + layer.bias.double())
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 1e-2
    monkeypatch.setattr(sl, "_serving_ddtree", lambda: False)  # another engine in the process
    sl._apply(lambda *a: calls.append(a), None, layer, x, layer.bias)
    assert len(calls) == 1
    sl._TABLE.clear()


def test_the_mlp_hook_leaves_what_the_table_does_not_name_to_sglang(tmp_path, monkeypatch):
    """CPU inputs, extra arguments or another activation: sglang's forward."""
    rows = [dict(m=4, n=8, k=16, act="silu_mul", best="bn64_bk16_sk1_st2_w4", best_vs_cublas=0.9)]
    sl._TABLE.clear()
    sl._TABLE.update(sl.load_table(_table(tmp_path, rows)))
    mlp = torch.nn.Module()
    mlp.act_fn = SiluAndMul()
    mlp.down_proj = torch.nn.Linear(16, 8, bias=False)
    mlp.down_proj.quant_method = UnquantizedLinearMethod()
    seen = []

    def original(self, x, *args, **kwargs):
        seen.append((tuple(x.shape), args, tuple(kwargs)))
        return x

    monkeypatch.setattr(sl, "_serving_ddtree", lambda: True)
    x = torch.randn(4, 32)
    assert sl._mlp_forward(original, mlp, x) is x  # a CPU tensor
    sl._mlp_forward(original, mlp, x, "extra")
    mlp.act_fn = object()
    sl._mlp_forward(original, mlp, x)
    assert seen == [((4, 32), (), ()), ((4, 32), ("extra",), ()), ((4, 32), (), ())]
    sl._TABLE.clear()


def test_server_info_lists_the_routed_products_only_with_the_switch(monkeypatch, tmp_path):
    """``/server_info``'s ``ddtree.skinny_gemm_routed`` (metrics.DDTreeStats.snapshot): what the
    hook sent to the kernel, with its tiling; absent without the switch."""
    from sglang_ddtree import metrics

    monkeypatch.delenv("SGLANG_DDTREE_SKINNY_GEMM", raising=False)
    assert metrics._skinny_routed() is None
    assert "skinny_gemm_routed" not in metrics.DDTreeStats(budget=4, max_depth=3, device="cpu").snapshot()
    monkeypatch.setenv("SGLANG_DDTREE_SKINNY_GEMM", str(tmp_path / "t.json"))
    sl._ROUTED.clear()
    sl._ROUTED[(16, 256, 512, "silu_mul")] = sl.Config.from_name("bn64_bk128_sk2_st3_w4")
    try:
        snap = metrics.DDTreeStats(budget=4, max_depth=3, device="cpu").snapshot()
        assert snap["skinny_gemm_routed"] == [[16, 256, 512, "silu_mul", "bn64_bk128_sk2_st3_w4"]]
    finally:
        sl._ROUTED.clear()
