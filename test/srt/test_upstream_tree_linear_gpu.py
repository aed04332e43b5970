"""sglang's own tree verify kernels for linear attention, driven exactly as its GDN backend
drives them in TARGET_VERIFY with ``topk > 1`` (``--speculative-ddtree-gdn-mode snapshot``),
on DDTREE's trees, against the float64 path-by-path references.

What this pins down: whether the per-node state path (conv kernel deriving parents from our
first-child / next-sibling links, recurrent kernel reading each node's parent snapshot, then
the snapshot of the accepted node copied into the request's slot) is exact on bushy, padded
best-first trees of several requests at once; the end-to-end hybrid mismatch (RESULTS.md,
session 2) is then either here or elsewhere in the engine.

Shapes: the tiny Qwen3.5 target's GDN layer and Qwen3.6-27B's. bf16 activations, fp32 state
(sglang's default ``mamba_ssm_dtype``). Tolerance as in test_gdn_tree_triton: 1e-2 relative to
the reference's max for bf16 inputs; a wrong parent gives O(1).
"""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core import gdn_tree
from sglang_ddtree.core.tree_builder import build_tree, pad_tree
from sglang_ddtree.core.verify_layout import build_verify_layout

pytestmark = pytest.mark.gpu

TINY = dict(H=2, HV=4, K=16, V=16, KW=4)
QWEN36 = dict(H=16, HV=48, K=128, V=128, KW=4)


def _layout(bs, budget, width, K=4, L=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    lp = (torch.randn(bs, L, K, generator=g) * 3).sort(-1, descending=True).values.log_softmax(-1)
    ids = torch.randint(0, 1000, (bs, L, K), generator=g)
    tree = pad_tree(build_tree(lp, ids, budget, None, L), width - 1)
    return build_verify_layout(tree, torch.zeros(bs, dtype=torch.long), torch.full((bs,), 7), L)


def _rel(x, ref):
    x = x.double().cpu()
    assert not torch.isnan(x).any()
    return float((x - ref).abs().max() / ref.abs().max().clamp(min=1e-30))


@pytest.mark.parametrize("shape", ["tiny", "qwen36"])
@pytest.mark.parametrize("budget", [8, 32])
@pytest.mark.parametrize("link_dtype", [torch.int64, torch.int32])
def test_sglang_tree_conv_and_gdn_on_ddtree_trees(shape, budget, link_dtype):
    from sglang.kernels.ops.attention.fla.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    s = TINY if shape == "tiny" else QWEN36
    H, HV, K, V, KW = s["H"], s["HV"], s["K"], s["V"], s["KW"]
    C = 2 * H * K + HV * V
    bs = 4
    width = max(budget + 1, 16)
    lay = _layout(bs, budget, width, seed=int(torch.randint(0, 10**6, ())))
    N = width
    T = bs * N
    dev = "cuda"
    bf = torch.bfloat16
    x = torch.randn(T, C, dtype=bf)
    w = torch.randn(C, KW, dtype=bf) * 0.5
    a = torch.randn(T, HV, dtype=bf)
    b = torch.randn(T, HV, dtype=bf)
    A_log = torch.randn(HV) * 0.5
    dt_bias = torch.randn(HV) * 0.5
    slots_n = bs + 3
    conv_pool = torch.randn(slots_n, KW - 1, C, dtype=bf).transpose(1, 2)  # channel-fastest, as sglang's
    ssm = torch.randn(slots_n, HV, V, K) * 0.3
    cache_idx = torch.tensor([5, 1, 6, 3], dtype=torch.int32)
    inter_idx = torch.arange(bs, dtype=torch.int32)

    # ---- sglang's kernels, called as gdn_backend.forward_extend does in TARGET_VERIFY.
    conv_dev = conv_pool.to(dev)
    inter_conv = torch.full((bs, N, C, KW - 1), float("nan"), dtype=bf, device=dev)
    fc = lay.first_child.to(dev, link_dtype).contiguous()
    ns = lay.next_sibling.to(dev, link_dtype).contiguous()
    rpt = torch.empty_like(fc)
    xc = x.to(dev).view(bs, N, C).transpose(1, 2)
    y = causal_conv1d_update(
        xc, conv_dev, w.to(dev), None, "silu", conv_state_indices=cache_idx.to(dev),
        intermediate_conv_window=inter_conv, intermediate_state_indices=inter_idx.to(dev),
        retrieve_next_token=fc, retrieve_next_sibling=ns, retrieve_parent_token=rpt,
    ).transpose(1, 2).reshape(T, C)
    # (The kernel also rolls the slot's conv state in place, chain-style; the commit overwrites
    # it with the accepted node's window, so it is not checked here.)
    for r in range(bs):
        par = lay.parent[r]
        real = par.clone()
        real[1:][real[1:] < 0] = 0  # padding nodes: the kernel treats an unlinked node as a root child
        assert torch.equal(rpt[r, 1:].long().cpu(), real[1:]), (r, rpt[r].tolist(), par.tolist())

    q_, k_, v_ = torch.split(y, [H * K, H * K, HV * V], dim=-1)
    q_ = q_.reshape(1, T, H, K).contiguous()
    k_ = k_.reshape(1, T, H, K).contiguous()
    v_ = v_.reshape(1, T, HV, V).contiguous()
    ssm_dev = ssm.to(dev)
    inter_ssm = torch.full((bs, N, HV, V, K), float("nan"), device=dev)
    o = fused_sigmoid_gating_delta_rule_update(
        A_log=A_log.to(dev), a=a.to(dev), dt_bias=dt_bias.to(dev), softplus_beta=1.0,
        softplus_threshold=20.0, q=q_, k=k_, v=v_, b=b.to(dev), initial_state_source=ssm_dev,
        initial_state_indices=cache_idx.to(dev), use_qk_l2norm_in_kernel=True,
        cu_seqlens=torch.arange(0, T + 1, N, device=dev, dtype=torch.int32),
        disable_state_update=True, intermediate_states_buffer=inter_ssm,
        intermediate_state_indices=inter_idx.to(dev), cache_steps=N, retrieve_parent_token=rpt,
    ).reshape(T, HV, V)
    assert torch.equal(ssm_dev.cpu(), ssm), "tree verify must not touch the recurrent state"

    # ---- float64 references, path by path, on the same bf16-rounded inputs.
    import torch.nn.functional as F

    g = -torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double())
    beta = torch.sigmoid(b.double())
    worst = {"conv": 0.0, "conv_win": 0.0, "o": 0.0, "state": 0.0}
    for r in range(bs):
        sl = slice(r * N, (r + 1) * N)
        par = lay.parent[r].clone()
        par[1:][par[1:] < 0] = 0
        st_conv = conv_pool[int(cache_idx[r])]
        y_ref = gdn_tree.conv_tree_path_reference(x[sl], w, None, st_conv, par)
        worst["conv"] = max(worst["conv"], _rel(y[sl], y_ref))
        for node in range(N):
            path = torch.tensor(gdn_tree.path_of(par, node))
            win = gdn_tree.conv_commit_state(x[sl].double(), st_conv.double(), path)
            worst["conv_win"] = max(worst["conv_win"], _rel(inter_conv[r, node], win))
        # The recurrence consumes the kernel's own (bf16) conv outputs: isolate the GDN part.
        yq, yk, yv = torch.split(y[sl].cpu().double(), [H * K, H * K, HV * V], dim=-1)
        qn = yq.view(N, H, K)
        kn = yk.view(N, H, K)
        qn = qn / torch.sqrt((qn ** 2).sum(-1, keepdim=True) + 1e-6)
        kn = kn / torch.sqrt((kn ** 2).sum(-1, keepdim=True) + 1e-6)
        o_ref, states = gdn_tree.gdn_tree_path_reference(
            qn, kn, yv.view(N, HV, V), g[sl], beta[sl], par, ssm[int(cache_idx[r])].transpose(-1, -2).double(), K ** -0.5)
        worst["o"] = max(worst["o"], _rel(o[sl], o_ref))
        worst["state"] = max(worst["state"], _rel(inter_ssm[r].transpose(-1, -2), states))
    print(f"[upstream tree kernels] {shape} budget {budget} {link_dtype}: {worst}")
    assert worst["conv"] < 1e-2 and worst["conv_win"] == 0.0, worst
    assert worst["o"] < 1e-2 and worst["state"] < 1e-2, worst
