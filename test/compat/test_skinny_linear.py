"""compat/skinny_linear.py: --speculative-ddtree-gemm-table, which sends a DDTREE server's
few-token linear layers to kernels/skinny_gemm.py where a table measured it faster than cuBLAS."""

from __future__ import annotations

import json
import pkgutil

import pytest
import torch

from sglang_ddtree.compat import skinny_linear as sl
from sglang_ddtree.kernels import gemm_table as gt
from sglang_ddtree.kernels.skinny_gemm import Config


H100 = "NVIDIA H100 80GB HBM3"


def _table(tmp_path, rows, device=H100):
    p = tmp_path / "skinny_gemm.json"
    p.write_text(json.dumps(dict(meta=dict(device=device), rows=rows)))
    return p


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts (and leaves) the process unresolved, with no table and nothing routed."""
    sl._TABLE.clear()
    sl._ROUTED.clear()
    sl._RESOLVED[0] = False
    yield
    sl._TABLE.clear()
    sl._ROUTED.clear()
    sl._RESOLVED[0] = False


def test_table_keeps_rows_that_beat_cublas_by_the_margin(tmp_path):
    rows = [
        dict(m=17, n=5120, k=17408, best="bn64_bk128_sk2_st4_w4", best_vs_cublas=0.95),
        dict(m=16, n=5120, k=17408, best="bn64_bk128_sk2_st4_w4", best_vs_cublas=0.99),  # not enough
        dict(m=17, n=96, k=5120, best=None),  # no tiling measured
        dict(m=300, n=96, k=5120, best="bn64_bk128_sk1_st4_w4", best_vs_cublas=0.5),  # beyond MAX_M
        dict(m=17, n=5120, k=17408, act="silu_mul", best="bn64_bk128_sk1_st4_w4", best_vs_cublas=0.9),
    ]
    table = gt.load_table(_table(tmp_path, rows))
    assert table == {(17, 5120, 17408, None): Config(BN=64, BK=128, split_k=2, num_stages=4, num_warps=4),
                     (17, 5120, 17408, "silu_mul"): Config(BN=64, BK=128, split_k=1, num_stages=4, num_warps=4)}


@pytest.mark.parametrize("text", ["not json", json.dumps({"rows": [{"m": 1, "best": "bn64_bk64_sk1_st2_w4", "best_vs_cublas": 0.5}]}), json.dumps({"nope": []}), json.dumps({"meta": [], "rows": []})])
def test_a_bad_table_is_refused_naming_the_flag(tmp_path, text):
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.raises(ValueError, match="--speculative-ddtree-gemm-table"):
        gt.load_table(p)
    with pytest.raises(ValueError, match="--speculative-ddtree-gemm-table"):
        gt.load_table(tmp_path / "missing.json")


def test_a_table_of_another_gpu_is_refused(tmp_path):
    p = _table(tmp_path, [], device="NVIDIA H200")
    assert gt.load_table(p) == {}  # no GPU named: not checked
    with pytest.raises(ValueError, match="measured on 'NVIDIA H200', this GPU is 'NVIDIA H100 80GB HBM3'.*none"):
        gt.table_path(str(p), H100)
    assert gt.table_path(str(_table(tmp_path, [])), H100) == tmp_path / "skinny_gemm.json"


def test_flag_values(tmp_path, monkeypatch):
    """``none`` and a machine without a CUDA GPU: no table; ``auto``: the shipped table of this
    GPU's name, none where none ships; every shipped table loads for the GPU it is named after."""
    assert gt.table_path("none", H100) is None
    assert gt.table_path("auto", None) is None
    assert gt.table_path("auto", "NVIDIA GeForce GTX 1080") is None
    assert gt.device_slug(H100) == "nvidia_h100_80gb_hbm3"
    shipped = sorted(gt.TABLES_DIR.glob("*.json"))
    for path in shipped:
        device = json.loads(path.read_text())["meta"]["device"]
        assert gt.shipped_table(device) == path and gt.table_path("auto", device) == path
        assert gt.load_table(path, device)  # at least one product served
    monkeypatch.setattr(gt, "TABLES_DIR", tmp_path)
    _table(tmp_path, [], device="NVIDIA X").rename(tmp_path / "nvidia_x.json")
    assert gt.table_path("auto", "NVIDIA X") == tmp_path / "nvidia_x.json"
    with pytest.raises(ValueError, match="is not a file"):
        gt.table_path(str(tmp_path / "missing.json"), H100)
    with pytest.raises(ValueError, match="CUDA GPUs only"):
        gt.table_path(str(tmp_path / "nvidia_x.json"), None)


def test_the_flag_resolves_once_from_the_published_server_args(tmp_path, monkeypatch):
    """Nothing is served before the server args are published; then a DDTREE server loads the
    flag's table once, another server none."""
    from types import SimpleNamespace

    from sglang_ddtree import server_args

    rows = [dict(m=4, n=8, k=64, best="bn64_bk64_sk1_st2_w4", best_vs_cublas=0.9)]
    path = str(_table(tmp_path, rows))
    monkeypatch.setattr(sl, "device_name", lambda: H100)
    published = [None]
    monkeypatch.setattr(server_args, "published_server_args", lambda: published[0])
    assert sl._active_table() == {} and not sl._RESOLVED[0]
    published[0] = SimpleNamespace(speculative_algorithm="DDTREE", speculative_ddtree_gemm_table=path)
    assert sl._active_table() == {(4, 8, 64, None): sl.Config.from_name("bn64_bk64_sk1_st2_w4")} and sl.active()
    published[0] = SimpleNamespace(speculative_algorithm="DFLASH", speculative_ddtree_gemm_table=path)
    assert sl._active_table()  # resolved once per process
    sl._RESOLVED[0] = False
    assert sl._active_table() == {} and not sl.active()  # not a DDTREE server


def test_the_hook_targets_resolve_and_fall_back_to_sglang(tmp_path, monkeypatch):
    """Registered: the targets exist in the installed sglang, and a product the table does not
    name (here: CPU tensors) goes to sglang's method."""
    from sglang.srt.plugins.hook_registry import HookRegistry

    rows = [dict(m=4, n=8, k=64, best="bn64_bk64_sk1_st2_w4", best_vs_cublas=0.9)]
    saved = {k: list(v) for k, v in HookRegistry._hooks.items()}
    try:
        sl.register_skinny_linear_hook()
        assert any(h is sl._apply for _, h, _ in HookRegistry._hooks[sl.TARGET])
        assert any(h is sl._mlp_forward for _, h, _ in HookRegistry._hooks[sl.MLP_TARGET])
        assert any(h is sl._lm_head for _, h, _ in HookRegistry._hooks[sl.LM_HEAD_TARGET])
    finally:
        HookRegistry._hooks.clear()
        HookRegistry._hooks.update(saved)
    for target in (sl.TARGET, sl.LM_HEAD_TARGET):
        obj_path, attr = target.rsplit(".", 1)
        assert hasattr(pkgutil.resolve_name(obj_path), attr)
    sl.set_table(gt.load_table(_table(tmp_path, rows)))
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


def test_the_mlp_hook_target_resolves():
    """The MLP target's module (sglang's Qwen2 MoE model file, whose dense MLP Qwen3.5 uses) does
    not import on sglang's CPU engine (the CI's): resolved in a process without it."""
    import os
    import subprocess
    import sys

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
    sl.set_table(gt.load_table(_table(tmp_path, rows)))
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
    sl.set_table(gt.load_table(_table(tmp_path, rows)))
    layer = torch.nn.Linear(512, 256, bias=True).to("cuda", torch.bfloat16)
    x = torch.randn(17, 512, device="cuda", dtype=torch.bfloat16)
    calls = []
    y = sl._apply(lambda *a: calls.append(a), None, layer, x, layer.bias)
    assert calls == []
    assert sl.routed() == {(17, 256, 512, None): sl.Config.from_name("bn64_bk128_sk2_st3_w4")}
    want = (x.double() @ layer.weight.double().T + layer.bias.double())
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 1e-2
    sl.set_table({})  # no table (--speculative-ddtree-gemm-table none, or another server)
    sl._apply(lambda *a: calls.append(a), None, layer, x, layer.bias)
    assert len(calls) == 1


def test_the_mlp_hook_leaves_what_the_table_does_not_name_to_sglang(tmp_path, monkeypatch):
    """CPU inputs, extra arguments or another activation: sglang's forward."""
    rows = [dict(m=4, n=8, k=16, act="silu_mul", best="bn64_bk16_sk1_st2_w4", best_vs_cublas=0.9)]
    sl.set_table(gt.load_table(_table(tmp_path, rows)))
    mlp = torch.nn.Module()
    mlp.act_fn = SiluAndMul()
    mlp.down_proj = torch.nn.Linear(16, 8, bias=False)
    mlp.down_proj.quant_method = UnquantizedLinearMethod()
    seen = []

    def original(self, x, *args, **kwargs):
        seen.append((tuple(x.shape), args, tuple(kwargs)))
        return x

    x = torch.randn(4, 32)
    assert sl._mlp_forward(original, mlp, x) is x  # a CPU tensor
    sl._mlp_forward(original, mlp, x, "extra")
    mlp.act_fn = object()
    sl._mlp_forward(original, mlp, x)
    assert seen == [((4, 32), (), ()), ((4, 32), ("extra",), ()), ((4, 32), (), ())]


def test_server_info_lists_the_routed_products_only_with_a_table(tmp_path):
    """``/server_info``'s ``ddtree.skinny_gemm_routed`` (metrics.DDTreeStats.snapshot): what the
    hook sent to the kernel, with its tiling; absent where the process serves without a table."""
    from sglang_ddtree import metrics

    assert metrics._skinny_routed() is None
    assert "skinny_gemm_routed" not in metrics.DDTreeStats(budget=4, max_depth=3, device="cpu").snapshot()
    cfg = sl.Config.from_name("bn64_bk128_sk2_st3_w4")
    sl.set_table({(16, 256, 512, "silu_mul"): cfg})
    sl._ROUTED[(16, 256, 512, "silu_mul")] = cfg
    snap = metrics.DDTreeStats(budget=4, max_depth=3, device="cpu").snapshot()
    assert snap["skinny_gemm_routed"] == [[16, 256, 512, "silu_mul", "bn64_bk128_sk2_st3_w4"]]


def test_the_packages_own_products_fall_back_to_f_linear(tmp_path):
    """``linear`` (the drafter's top-K head): ``F.linear`` where the table has no row or the
    tensors are not CUDA ones."""
    sl.set_table(gt.load_table(_table(tmp_path, [dict(m=4, n=8, k=64, best="bn64_bk64_sk1_st2_w4",
                                                      best_vs_cublas=0.9)])))
    w = torch.randn(8, 64)
    x = torch.randn(4, 64)
    assert torch.equal(sl.linear(x, w), torch.nn.functional.linear(x, w))
    assert sl.routed() == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel path needs a GPU")
def test_the_packages_own_product_runs_the_kernel_where_the_table_names_it(tmp_path):
    sl.set_table(gt.load_table(_table(tmp_path, [dict(m=16, n=256, k=512, best="bn64_bk128_sk2_st3_w4",
                                                      best_vs_cublas=0.9)])))
    w = torch.randn(300, 512, device="cuda", dtype=torch.bfloat16)[:256]  # a row slice, as the head's
    x = torch.randn(16, 512, device="cuda", dtype=torch.bfloat16)
    y = sl.linear(x, w)
    assert sl.routed() == {(16, 256, 512, None): sl.Config.from_name("bn64_bk128_sk2_st3_w4")}
    want = x.double() @ w.double().T
    assert not torch.isnan(y).any()
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 1e-2


class _Head(torch.nn.Module):
    """An unquantized lm_head stand-in (sglang's method name: not applied as a quantized head)."""

    def __init__(self, vocab, hidden, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(vocab, hidden, dtype=torch.bfloat16, device=device))
        self.quant_method = type("UnquantizedEmbeddingMethod", (), {"apply": lambda *a: None})()


def test_the_lm_head_hook_leaves_other_heads_to_sglang(tmp_path):
    """CPU weights, an fp32 head, a bias or a LoRA head: sglang's computation."""
    from types import SimpleNamespace

    sl.set_table(gt.load_table(_table(tmp_path, [dict(m=4, n=8, k=64, best="bn64_bk64_sk1_st2_w4",
                                                      best_vs_cublas=0.9)])))
    calls = []

    def original(self, h, lm_head, bias=None, **kw):
        calls.append(kw)
        return "sglang"

    proc = SimpleNamespace(use_fp32_lm_head=False, rl_on_policy_target=None)
    head = _Head(8, 64, "cpu")
    h = torch.randn(4, 64, dtype=torch.bfloat16)
    assert sl._lm_head(original, proc, h, head, out=None) == "sglang"  # CPU: not routed
    assert calls == [{"out": None}] and sl.routed() == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel path needs a GPU")
def test_the_lm_head_hook_runs_the_kernel_where_the_table_names_it(tmp_path):
    from types import SimpleNamespace

    sl.set_table(gt.load_table(_table(tmp_path, [dict(m=16, n=256, k=512, best="bn64_bk128_sk2_st3_w4",
                                                      best_vs_cublas=0.9)])))
    calls = []
    proc = SimpleNamespace(use_fp32_lm_head=False, rl_on_policy_target=None)
    head = _Head(256, 512, "cuda")
    h = torch.randn(16, 512, device="cuda", dtype=torch.bfloat16)
    y = sl._lm_head(lambda *a, **k: calls.append(a), proc, h, head)
    assert calls == [] and list(sl.routed()) == [(16, 256, 512, None)]
    want = h.double() @ head.weight.double().T
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 1e-2
    for other in (SimpleNamespace(use_fp32_lm_head=True, rl_on_policy_target=None),
                  SimpleNamespace(use_fp32_lm_head=False, use_fp32_lm_head_output=True, rl_on_policy_target=None)):
        sl._lm_head(lambda *a, **k: calls.append(a), other, h, head)
    sl._lm_head(lambda *a, **k: calls.append(a), proc, h, head, torch.zeros(256, device="cuda"))  # a bias
    assert len(calls) == 3
