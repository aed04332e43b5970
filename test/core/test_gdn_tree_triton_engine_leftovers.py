"""Tests of the engine's use of the tree GatedDeltaNet kernels, left behind when the kernel tests
moved to test/kernels/: the wy-mode layer hook (``compat/gdn_wy.py``) and its SGLANG_DDTREE_WY_*
environment knobs. They belong with the engine's tests; the kernels' own are in test/kernels/.

The layer test runs the kernels: on CPU in the Triton interpreter, in a child process (as the
kernel tests do, see test/kernels/gdn_cases.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))  # the kernel tests' helpers

from gdn_cases import DEV, interpreter_test, kernels_here, rel, trees  # noqa: E402
from sglang_ddtree.kernels.gdn_tree import naive  # noqa: E402

test_in_triton_interpreter = interpreter_test(__file__)


# bf16: 2e-2 of the reference's max (~5 bf16 unit roundoffs). The layer output is rounded to bf16
# after a verify from bf16 projections; over 60 fresh draws in the interpreter its error was
# 0.53% of the max at the median and 0.98% at worst, and one CI draw reached 1.002%, so
# 1e-2 failed on rounding alone. A wrong parent, term or slot is O(1); float32 checks the
# algebra to 2e-5.
@pytest.mark.parametrize("conv_layout,gate_shift", [("channel_fastest", 0.0), ("window_fastest", 12.0)])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 2e-2)])
@kernels_here
def test_wy_layer_verify_and_commit_match_references(dtype, tol, conv_layout, gate_shift):
    """compat/gdn_wy.py as the GDN backend hook drives it: one layer's tree verify from sglang's
    packed ``mixed_qkv`` and pools (conv pool ``[slots, C, W-1]`` stored channel-fastest or, as
    sglang 0.5.17's MambaPool allocates it, window-fastest; state pool [slots, HV, V, K]), then
    the commit of each request's accepted path; against the float64 path references. The
    window-fastest case also uses gates as strong as a real model's (``gate_shift``) and the
    per-layer buffers a CUDA-graph verify shares across batch sizes."""
    import types

    from sglang_ddtree.compat import gdn_wy

    H, HV, K, V, W, n = 2, 4, 16, 16, 4, 23
    C = 2 * H * K + HV * V
    batch = trees(n)
    bs = len(batch)
    parents = torch.stack([t[0] for t in batch])
    anc = torch.stack([t[1] for t in batch])
    x = torch.randn(bs * n, C).to(dtype)
    w = (torch.randn(C, W) * 0.5).to(dtype)
    a = (torch.randn(bs * n, HV) + gate_shift).to(dtype)
    b = torch.randn(bs * n, HV).to(dtype)
    A_log = torch.randn(HV) * 0.5
    dt_bias = torch.randn(HV) * 0.5
    if conv_layout == "channel_fastest":
        conv_pool = torch.randn(7, W - 1, C).to(dtype).transpose(1, 2)
    else:
        conv_pool = torch.randn(7, C, W - 1).to(dtype)
    ssm = torch.randn(7, HV, V, K) * 0.3
    slots = torch.tensor([4, 1, 5, 2])

    layer = types.SimpleNamespace(
        layer_id=3, activation="silu", num_q_heads=H, num_k_heads=H, num_v_heads=HV, head_q_dim=K,
        head_k_dim=K, head_v_dim=V, q_dim=H * K, k_dim=H * K, v_dim=HV * V, conv_weights=w.to(DEV), bias=None,
        A_log=A_log.to(DEV), dt_bias=dt_bias.to(DEV))
    # sglang's pool stacks every layer's state; this layer is pool layer 1 of 2 (layer 0 must
    # stay as it was).
    stack_conv = torch.stack([torch.randn_like(conv_pool), conv_pool])
    if conv_layout == "channel_fastest":  # stacking copied it window-fastest: back to sglang's layout
        stack_conv = stack_conv.transpose(2, 3).contiguous().transpose(2, 3)
    stack_conv = stack_conv.to(DEV)
    stack_ssm = torch.stack([torch.randn_like(ssm), ssm]).to(DEV)
    other = (stack_conv[0].clone(), stack_ssm[0].clone())
    pool_states = types.SimpleNamespace(conv=[stack_conv], temporal=stack_ssm)
    cache = types.SimpleNamespace(conv=[stack_conv[1]], temporal=stack_ssm[1])
    GDNAttnBackend = type("GDNAttnBackend", (), {})  # the class name is what the hook checks
    linear = GDNAttnBackend()
    linear.req_to_token_pool = types.SimpleNamespace(mamba2_layer_cache=lambda lid: cache,
                                                     get_speculative_mamba2_params_all_layers=lambda: pool_states)
    linear.forward_metadata = types.SimpleNamespace(mamba_cache_indices=slots.to(DEV))
    backend = types.SimpleNamespace(linear_attn_backend=linear, _is_full_attn=lambda layer, lid: False)
    lay = types.SimpleNamespace(parent=parents.to(DEV), ancestor_mask=anc.to(DEV))
    wy = gdn_wy.WyVerifyState.from_layout(lay)
    shared = conv_layout == "window_fastest"  # as a CUDA-graph verify runs it: buffers for more trees
    if shared:
        wy.work, wy.work_rows = {}, bs + 2
    fb = types.SimpleNamespace(spec_info=types.SimpleNamespace(ddtree_wy=wy),
                               forward_mode=types.SimpleNamespace(is_target_verify=lambda: True))
    # Through the hook, called as HybridLinearAttnBackend.forward calls forward_extend (positional).
    o = gdn_wy._forward_extend(None, backend, layer, fb, True, None, None, None, x.to(DEV), a.to(DEV), b.to(DEV))
    assert torch.equal(cache.conv[0].cpu(), conv_pool) and torch.equal(cache.temporal.cpu(), ssm)  # verify writes no state
    # The commit inputs live in buffers stacked over the pool's 2 layers, this one's at index 1.
    assert list(wy.saved) == [1] and wy.work["u"].shape[:2] == (2, wy.work_rows)
    assert wy.work_rows == (bs + 2 if shared else bs) and torch.equal(wy.work["x"][1, : bs * n].cpu(), x)

    g = -torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double())
    beta = torch.sigmoid(b.double())
    ref_o, ref_states = [], []
    for r in range(bs):
        sl = slice(r * n, (r + 1) * n)
        y = naive.conv_tree_path_reference(x[sl], w, None, conv_pool[slots[r]], parents[r], round_products=True)
        q, k, v = torch.split(y, [H * K, H * K, HV * V], dim=-1)
        qn, kn = q.view(n, H, K), k.view(n, H, K)
        qn = qn / torch.sqrt((qn ** 2).sum(-1, keepdim=True) + 1e-6)
        kn = kn / torch.sqrt((kn ** 2).sum(-1, keepdim=True) + 1e-6)
        o_r, st = naive.gdn_tree_path_reference(qn, kn, v.reshape(n, HV, V), g[sl], beta[sl], parents[r],
                                                   ssm[slots[r]].transpose(-1, -2).double(), K ** -0.5)
        ref_o.append(o_r)
        ref_states.append(st)
    assert rel(o, torch.cat(ref_o)) < tol

    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    picks = []
    for r in range(bs):
        depth = torch.tensor([len(naive.path_of(parents[r], i)) for i in range(n)])
        path = naive.path_of(parents[r], [int(depth.argmax()), 0, n - 1, n // 2][r])[:P]
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
        picks.append(path)
    # Prefix-cache tracking: request 0 keeps the state after its path index 1 in slot 0, request
    # 2 the root's in slot 3; requests 1 and 3 cross no boundary (-1). Any other slot no request
    # owns must stay as it was.
    track_slots, track_at = torch.tensor([0, 0, 3, 3]), torch.tensor([1, -1, 0, -1])
    untouched = [i for i in range(7) if i not in slots.tolist() and i not in (0, 3)]
    assert untouched == [6]
    gdn_wy.wy_commit(wy, accepted.to(DEV), accept_len.to(DEV), track_slots=track_slots.to(DEV),
                     track_at=track_at.to(DEV))
    assert wy.saved == {}
    st, cv = cache.temporal.cpu(), cache.conv[0].cpu()
    for r, path in enumerate(picks):
        assert rel(st[slots[r]], ref_states[r][path[-1]].transpose(-1, -2)) < tol, r
        want = naive.conv_commit_state(x[r * n:(r + 1) * n], conv_pool[slots[r]], torch.tensor(path))
        assert torch.equal(cv[slots[r]], want), r
    for r, t in ((0, 1), (2, 0)):  # the tracked states, from the pre-commit slot contents
        dst, path = int(track_slots[r]), picks[r][: t + 1]
        assert rel(st[dst], ref_states[r][path[-1]].transpose(-1, -2)) < tol, r
        want = naive.conv_commit_state(x[r * n:(r + 1) * n], conv_pool[slots[r]], torch.tensor(path))
        assert torch.equal(cv[dst], want), r
    assert torch.equal(st[untouched], ssm[untouched]) and torch.equal(cv[untouched], conv_pool[untouched])
    assert torch.equal(stack_ssm[0], other[1]) and torch.equal(stack_conv[0], other[0])  # the other layer


def test_wy_hook_passes_other_calls_through():
    import types

    from sglang_ddtree.compat import gdn_wy

    seen = []

    def original(self, layer, forward_batch, save_kv_cache, q, k, v, mixed_qkv, a, b, **kw):
        seen.append((save_kv_cache, mixed_qkv, a, b))
        return "sglang"

    cases = [(None, True, False), (types.SimpleNamespace(ddtree_wy=None), True, False),
             (types.SimpleNamespace(ddtree_wy=object()), False, False),  # not a verify
             (types.SimpleNamespace(ddtree_wy=object()), True, True)]    # a full-attention layer
    for spec, verify, full in cases:
        fb = types.SimpleNamespace(spec_info=spec, forward_mode=types.SimpleNamespace(is_target_verify=lambda v=verify: v))
        be = types.SimpleNamespace(_is_full_attn=lambda layer, lid, f=full: f)
        assert gdn_wy._forward_extend(original, be, "L", fb, True, None, None, None, 1, 2, 3) == "sglang"
    assert seen == [(True, 1, 2, 3)] * 4
    # A wy verify on a linear backend that is not GatedDeltaNet fails naming the flag.
    fb = types.SimpleNamespace(spec_info=types.SimpleNamespace(ddtree_wy=object()),
                               forward_mode=types.SimpleNamespace(is_target_verify=lambda: True))
    be = types.SimpleNamespace(_is_full_attn=lambda layer, lid: False, linear_attn_backend=object())
    with pytest.raises(NotImplementedError, match="--speculative-ddtree-gdn-mode wy"):
        gdn_wy._forward_extend(original, be, "L", fb, True, None, None, None, 1, 2, 3)


def test_pairs_in_prep_knob(monkeypatch):
    """SGLANG_DDTREE_WY_PAIRS_IN_PREP: "1" / "0" force the twostage prep's pair products on or
    off, unset or empty leaves the kernel's rule, anything else is an error naming the variable."""
    from sglang_ddtree.compat import gdn_wy

    monkeypatch.delenv(gdn_wy.PAIRS_ENV, raising=False)
    assert gdn_wy._env_flag(gdn_wy.PAIRS_ENV) is None          # unset: the kernel's rule
    for val, want in (("1", True), ("0", False), ("", None)):
        monkeypatch.setenv(gdn_wy.PAIRS_ENV, val)
        assert gdn_wy._env_flag(gdn_wy.PAIRS_ENV) is want
    monkeypatch.setenv(gdn_wy.PAIRS_ENV, "yes")
    with pytest.raises(ValueError, match="SGLANG_DDTREE_WY_PAIRS_IN_PREP must be 0 or 1"):
        gdn_wy._env_flag(gdn_wy.PAIRS_ENV)


def test_commit_mode_knob(monkeypatch):
    """SGLANG_DDTREE_WY_COMMIT: unset -> "cuda" where the CUDA extension loads, else "fused"
    (Triton: the fallback issue 6 asks for); "fused" / "per-layer" / "cuda" force; anything
    else, or "cuda" where the extension cannot load, is an error naming the variable — never a
    quiet fallback to another kernel. Whether it loads is asked once per process."""
    from sglang_ddtree.compat import gdn_wy
    from sglang_ddtree.kernels import tree_cuda

    asked = []

    def fake(why):
        def available():
            asked.append(why)
            return why
        monkeypatch.setattr(tree_cuda, "available", available)
        gdn_wy._cuda_commit_unavailable.cache_clear()

    monkeypatch.delenv(gdn_wy.COMMIT_ENV, raising=False)
    fake("no CUDA device")
    assert gdn_wy._kernel_options()["commit"] == "fused"
    assert gdn_wy._kernel_options()["commit"] == "fused" and len(asked) == 1  # asked once
    fake(None)
    assert gdn_wy._kernel_options()["commit"] == "cuda"
    for val in ("fused", "per-layer", "cuda"):
        monkeypatch.setenv(gdn_wy.COMMIT_ENV, val)
        assert gdn_wy._kernel_options()["commit"] == val
    monkeypatch.setenv(gdn_wy.COMMIT_ENV, "perlayer")
    with pytest.raises(ValueError, match="SGLANG_DDTREE_WY_COMMIT must be one of"):
        gdn_wy._kernel_options()
    monkeypatch.setenv(gdn_wy.COMMIT_ENV, "cuda")
    fake("no CUDA device")
    with pytest.raises(RuntimeError, match="SGLANG_DDTREE_WY_COMMIT=cuda: .*no CUDA device"):
        gdn_wy._kernel_options()
    monkeypatch.setenv(gdn_wy.COMMIT_ENV, "fused")
    assert gdn_wy._kernel_options()["commit"] == "fused"
    gdn_wy._cuda_commit_unavailable.cache_clear()  # the next test asks the real extension again


def test_solve_precision_and_state_parts_knobs(monkeypatch):
    """SGLANG_DDTREE_WY_SOLVE_PRECISION / _STATE_PARTS reach the verify's options; unset leaves
    the kernel's defaults; a bad value is an error naming the variable (the engine reads them at
    its first verify). (The kernel refuses bad options itself: test/kernels/test_verify.py.)"""
    from sglang_ddtree.compat import gdn_wy

    for env in (gdn_wy.SOLVE_PRECISION_ENV, gdn_wy.STATE_PARTS_ENV):
        monkeypatch.delenv(env, raising=False)
    opts = gdn_wy._kernel_options()
    assert opts["solve_precision"] is None and opts["state_parts"] is None
    monkeypatch.setenv(gdn_wy.SOLVE_PRECISION_ENV, "bf16x3")
    monkeypatch.setenv(gdn_wy.STATE_PARTS_ENV, "2")
    opts = gdn_wy._kernel_options()
    assert opts["solve_precision"] == "bf16x3" and opts["state_parts"] == 2
    monkeypatch.setenv(gdn_wy.SOLVE_PRECISION_ENV, "bf16")
    with pytest.raises(ValueError, match="SGLANG_DDTREE_WY_SOLVE_PRECISION must be one of"):
        gdn_wy._kernel_options()
    monkeypatch.setenv(gdn_wy.SOLVE_PRECISION_ENV, "tf32x3")
    monkeypatch.setenv(gdn_wy.STATE_PARTS_ENV, "1")
    with pytest.raises(ValueError, match="SGLANG_DDTREE_WY_STATE_PARTS must be 2 or 3"):
        gdn_wy._kernel_options()
