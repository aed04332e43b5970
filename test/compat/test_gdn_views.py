"""compat/gdn_views.py: a wy DDTREE verify's GatedDeltaNet layer through sglang's own
``Qwen3_5GatedDeltaNet.forward`` and through the hook, on one stand-in layer (projections, core
attention and out_proj as small torch functions). sglang's module does not import on the CPU
engine, so its forward's branch for value / key head ratios outside 1, 2, 4 is restated here
(:func:`_sglang_forward`, from sglang 0.5.17 ``models/qwen3_5.py``). The hook's output equals sglang's, its core attention gets views of the projections where
sglang's gets copies, and every other forward goes to sglang. Both paths normalise with the
float64 reference of the gated norm here (sglang's norm and ours are Triton kernels; ours is held
to that reference in test/kernels/test_gated_norm.py, and to sglang's kernel there on a GPU).
"""

from __future__ import annotations

import functools
import types

import pytest
import torch

from sglang_ddtree.compat import gdn_views
from sglang_ddtree.kernels.gated_norm import gated_rmsnorm_reference

DEV = "cpu"


def _rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


class _Norm:
    """Stands in for sglang's gated RMSNorm (``norm_before_gate=True``, one group per head):
    its formula in float64 on ``[T * HV, V]`` rows, as sglang's forward calls it."""

    def __init__(self, weight, activation="swish", group_size=None):
        self.weight, self.eps, self.activation = weight, 1e-6, activation
        self.group_size, self.norm_before_gate, self.bias = group_size, True, None

    def __call__(self, x, z):
        y = gated_rmsnorm_reference(x.unsqueeze(1), z.unsqueeze(1), self.weight, self.eps, self.activation,
                                    dtype=torch.float64)
        return y.reshape(x.shape)


def _layer(dtype, H=2, HV=6, K=8, V=16, hidden=40, seed=0, activation="swish"):
    """A Qwen3.5 GDN layer's attributes (value heads / key heads = 3, Qwen3.6-27B's ratio) and a
    log of what its core attention received."""
    g = torch.Generator().manual_seed(seed)
    w_qkvz = (torch.randn(2 * H * K + 2 * HV * V, hidden, generator=g) * 0.2).to(dtype).to(DEV)
    w_ba = (torch.randn(2 * HV, hidden, generator=g) * 0.2).to(dtype).to(DEV)
    w_out = (torch.randn(hidden, HV * V, generator=g) * 0.2).to(dtype).to(DEV)
    layer = types.SimpleNamespace(
        attn_tp_size=1, key_dim=H * K, value_dim=HV * V, num_v_heads=HV, num_k_heads=H, head_k_dim=K,
        head_v_dim=V, alt_stream=None, seen=[],
        norm=_Norm((torch.rand(V, generator=g) + 0.5).to(dtype).to(DEV), activation))
    layer._forward_input_proj = lambda h: (h @ w_qkvz.T, h @ w_ba.T)
    layer.out_proj = lambda x: (x @ w_out.T, None)

    def attn(forward_batch, mixed_qkv, a, b):
        layer.seen.append((mixed_qkv, a, b))
        T = mixed_qkv.shape[0]
        q = mixed_qkv[:, : H * K].float().reshape(T, H, 1, K).sum(-1)  # [T, H, 1]
        v = mixed_qkv[:, 2 * H * K:].float().reshape(T, HV, V)
        gate = torch.sigmoid(a.float()) * b.float()
        return (v * gate[..., None] + q.repeat_interleave(HV // H, 1)).to(mixed_qkv.dtype)  # [T, HV, V]

    layer.attn = attn
    return layer


def _sglang_forward(self, hidden_states, forward_batch):
    """sglang 0.5.17 ``Qwen3_5GatedDeltaNet.forward`` where value / key heads is not 1, 2 or 4:
    split the projections, copy b and a, concatenate q, k, v, run the core attention, normalise
    ``[T * HV, V]`` rows with the gate reshaped alike (a copy), out_proj."""
    qkvz, ba = self._forward_input_proj(hidden_states)
    k_tp, v_tp, nv = self.key_dim, self.value_dim, self.num_v_heads
    query, key, value, z = qkvz.split([k_tp, k_tp, v_tp, v_tp], dim=-1)
    b, a = ba.split([nv, nv], dim=-1)
    value = value.reshape(value.size(0), -1, self.head_v_dim)
    z = z.reshape(z.size(0), -1, self.head_v_dim)
    b, a = b.contiguous(), a.contiguous()
    query, key, value = (x.reshape(x.shape[0], -1) for x in (query, key, value))
    mixed_qkv = torch.cat((query, key, value), dim=-1)
    core = self.attn(forward_batch, mixed_qkv=mixed_qkv, a=a, b=b)
    z_shape = z.shape
    core = self.norm(core.reshape(-1, core.shape[-1]), z.reshape(-1, z.shape[-1]))
    core = core.reshape(z_shape).reshape(z_shape[0], -1)
    return self.out_proj(core)[0]


def _batch(verify=True):
    return types.SimpleNamespace(forward_mode=types.SimpleNamespace(is_target_verify=lambda: verify))


def _wy(monkeypatch, on=True):
    monkeypatch.setattr(gdn_views, "wy_server", lambda: on)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("activation", ["swish", "sigmoid"])
def test_hook_output_equals_sglangs_forward(dtype, tol, activation, monkeypatch):
    _wy(monkeypatch)
    monkeypatch.setattr(gdn_views, "gated_rmsnorm", functools.partial(gated_rmsnorm_reference, dtype=torch.float64))
    layer, forward = _layer(dtype, activation=activation), _sglang_forward
    h = torch.randn(17, 40, generator=torch.Generator().manual_seed(1)).to(dtype).to(DEV)
    want = forward(layer, h, _batch())
    qkv_copy, a_copy, b_copy = layer.seen.pop()
    got = gdn_views._forward(forward, layer, h, _batch())
    qkv_view, a_view, b_view = layer.seen.pop()
    assert not torch.isnan(got).any() and got.dtype == want.dtype and got.shape == want.shape
    assert _rel(got, want) < tol
    # The same values reach the core attention, as views (strided rows) instead of copies.
    assert torch.equal(qkv_view, qkv_copy) and torch.equal(a_view, a_copy) and torch.equal(b_view, b_copy)
    assert qkv_copy.is_contiguous() and a_copy.is_contiguous()
    assert qkv_view.stride(0) == 2 * 16 + 2 * 96 and a_view.stride(0) == b_view.stride(0) == 12


def test_other_forwards_go_to_sglang(monkeypatch):
    calls = []

    def original(self, h, fb):
        calls.append((self, h, fb))
        return "sglang"

    layer = _layer(torch.float32)
    h = torch.zeros(3, 40)
    _wy(monkeypatch)
    assert gdn_views._forward(original, layer, h, _batch(verify=False)) == "sglang"  # decode / extend
    assert gdn_views._forward(original, layer, (h, h, h), _batch()) == "sglang"  # AMD's fused-quant tuple
    layer.norm.group_size = 4
    assert gdn_views._forward(original, layer, h, _batch()) == "sglang"  # a grouped norm
    layer.norm.group_size, layer.norm.activation = None, "gelu"
    assert gdn_views._forward(original, layer, h, _batch()) == "sglang"
    layer.norm.activation = "swish"
    monkeypatch.setattr(gdn_views.tree_gdn, "cross_check_enabled", lambda: True)
    assert gdn_views._forward(original, layer, h, _batch()) == "sglang"  # sglang's verify runs beside ours
    monkeypatch.setattr(gdn_views.tree_gdn, "cross_check_enabled", lambda: False)
    monkeypatch.setenv("SGLANG_DDTREE_GDN_COPIES", "1")
    assert gdn_views._forward(original, layer, h, _batch()) == "sglang"  # the A/B's other side
    monkeypatch.delenv("SGLANG_DDTREE_GDN_COPIES")
    _wy(monkeypatch, on=False)
    assert gdn_views._forward(original, layer, h, _batch()) == "sglang"  # snapshot mode, DFLASH, no speculation
    assert len(calls) == 7 and all(c[0] is layer for c in calls) and not layer.seen


def test_projection_views_per_rank_and_shape_errors():
    layer = types.SimpleNamespace(attn_tp_size=2, key_dim=32, value_dim=96, num_v_heads=6, head_v_dim=16)
    qkvz, ba = torch.arange(5 * 128.0).view(5, 128), torch.arange(5 * 6.0).view(5, 6)
    mixed_qkv, z, b, a = gdn_views.projection_views(layer, qkvz, ba)  # this rank: 16 + 16 + 48 + 48 columns
    assert mixed_qkv.shape == (5, 80) and z.shape == (5, 3, 16) and b.shape == a.shape == (5, 3)
    assert torch.equal(z.reshape(5, 48), qkvz[:, 80:]) and torch.equal(a, ba[:, 3:]) and torch.equal(b, ba[:, :3])
    assert mixed_qkv.data_ptr() == qkvz.data_ptr() and a.data_ptr() == ba.data_ptr() + 3 * ba.element_size()
    with pytest.raises(ValueError, match="columns"):
        gdn_views.projection_views(layer, qkvz[:, :100], ba)
