"""Tree GatedDeltaNet state commit (``kernels/gdn_tree/commit.py``): one launch over stacked
layers equals one per layer, keys recomputed from the pre-conv inputs equal the keys given, and
sgl-kernel's CUDA port equals the Triton commit and the float64 path reference (GPU). The
verify-then-commit checks against the path reference are in ``test_verify.py``. On CPU the
kernels run in the Triton interpreter (see ``gdn_cases``).
"""

from __future__ import annotations

import pytest
import torch

from gdn_cases import DEV, gdn_inputs, interpreter_test, kernels_here, reference, rel, trees
from sglang_ddtree.kernels.gdn_tree import (
    conv_weight_tables, naive, tree_conv, tree_conv_commit, tree_conv_commit_layers, tree_gdn_commit,
    tree_gdn_commit_from_x_layers, tree_gdn_commit_layers, tree_gdn_verify,
)

test_in_triton_interpreter = interpreter_test(__file__)


@pytest.mark.gpu
def test_cuda_commit_equals_triton_commit_and_reference():
    from sglang_ddtree.kernels import tree_cuda

    if tree_cuda.available() is not None:
        pytest.skip(f"CUDA tree kernels unavailable: {tree_cuda.available()}")
    H, HV, K, V, n = 16, 48, 128, 128, 65  # Qwen3.6-27B GDN heads, budget 64
    batch = trees(n)
    bs = len(batch)
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(bs, n, H, HV, K, V, torch.bfloat16)
    anc = torch.stack([t[1] for t in batch])
    parents = [t[0] for t in batch]
    slots = torch.tensor([3, 0, 4, 1])
    args = [x.cuda() for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    st0 = state.cuda()
    o, u, G = tree_gdn_verify(*args, st0, slots.cuda())
    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    for r, par in enumerate(parents):
        path = naive.path_of(par, [n - 1, n // 3, 0, 5][r])[:P]
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
    st_tr, st_cu = st0.clone(), st0.clone()
    tree_gdn_commit(st_tr, slots.cuda(), u, G, args[1], accepted.cuda(), accept_len.cuda())
    tree_cuda.gdn_tree_commit(st_cu, slots.cuda(), u, G, args[1], accepted.cuda(), accept_len.cuda())
    assert not torch.isnan(st_cu).any()
    torch.testing.assert_close(st_cu, st_tr, rtol=1e-5, atol=1e-5)
    _, ref_states = reference(q, k, v, a, b, A_log, dt_bias, parents, state[slots], K ** -0.5)
    for r in range(bs):
        node = int(accepted[r, accept_len[r]])
        assert rel(st_cu[slots[r]], ref_states[r][node].transpose(-1, -2)) < 1e-2


@kernels_here
def test_commits_over_stacked_layers_equal_one_launch_per_layer():
    """The engine commits every layer in one launch (pool and buffers stacked over layers, the
    pool's conv windows channel-fastest): the same numbers as one launch per layer, with and
    without destination slots."""
    L, H, HV, K, V, C, W, n = 3, 2, 4, 16, 16, 80, 4, 9
    bs, slots_n, P = 2, 5, 4
    slots = torch.tensor([3, 1], device=DEV)
    u = torch.randn(L, bs, n, HV, V, device=DEV)
    G = -torch.rand(L, bs, n, HV, device=DEV)
    k = torch.randn(L, bs * n, H, K, device=DEV)
    x = torch.randn(L, bs * n, C, device=DEV).to(torch.bfloat16)
    state = torch.randn(L, slots_n, HV, V, K, device=DEV)
    conv = torch.randn(L, slots_n, W - 1, C, device=DEV).to(torch.bfloat16).transpose(2, 3)
    accepted = torch.tensor([[0, 2, 5, -1], [0, 1, -1, -1]], device=DEV)
    accept_len = torch.tensor([2, 1], device=DEV)
    for dst in (None, torch.tensor([4, -1], device=DEV)):
        st_one, cv_one = state.clone(), conv.clone()
        for l in range(L):
            tree_gdn_commit(st_one[l], slots, u[l], G[l], k[l], accepted, accept_len, dst_idx=dst)
            tree_conv_commit(x[l], cv_one[l], slots, accepted, accept_len, dst_idx=dst)
        st_all, cv_all = state.clone(), conv.clone()
        tree_gdn_commit_layers(st_all, slots, u, G, k, accepted, accept_len, dst_idx=dst)
        tree_conv_commit_layers(x, cv_all, slots, accepted, accept_len, dst_idx=dst)
        assert torch.equal(st_all, st_one) and torch.equal(cv_all, cv_one)
        assert not torch.equal(st_all, state)  # something was written
        # Keys recomputed from x (what the engine runs; per-layer weights through address
        # tables) equal the commit from the keys the same conv makes.
        w = [(torch.randn(C, W, device=DEV) * 0.5).to(torch.bfloat16) for _ in range(L)]
        bias = [(torch.randn(C, device=DEV) * 0.1).to(torch.bfloat16) for _ in range(L)]
        # (The accepted paths 0-2-5 and 0-1 are root paths of these trees.)
        parent = torch.tensor([[-1, 0, 0, 1, 0, 2, 5, 3, 6], [-1, 0, 1, 2, 0, 4, 1, 6, 7]], device=DEV)
        keys = torch.stack([tree_conv(x[l], w[l], bias[l], conv[l], slots, parent)[:, H * K: 2 * H * K]
                            for l in range(L)]).unflatten(-1, (H, K))
        st_k, st_x = state.clone(), state.clone()
        tree_gdn_commit_layers(st_k, slots, u, G, keys.contiguous(), accepted, accept_len, dst_idx=dst)
        w_tab, b_tab = conv_weight_tables(w, bias, torch.bfloat16, DEV)
        tree_gdn_commit_from_x_layers(st_x, slots, u, G, x, w_tab, b_tab, W, conv, H * K, H, accepted,
                                      accept_len, dst_idx=dst)
        assert rel(st_x, st_k.double().cpu()) < 1e-6
        written = [4] if dst is not None else slots.tolist()
        rest = [i for i in range(slots_n) if i not in written]
        assert torch.equal(st_all[:, rest], state[:, rest]) and torch.equal(cv_all[:, rest], conv[:, rest])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,with_bias", [(torch.bfloat16, True), (torch.bfloat16, False), (torch.float32, True)])
def test_cuda_from_x_commit_equals_triton(dtype, with_bias):
    """sgl-kernel's port of the engine's commit (keys recomputed from the pre-conv inputs, every
    layer in one launch) against the Triton kernel it ports, at the 27B's head shapes: the same
    states within fp32 rounding (the two sum the key norms in different orders), no NaN, slots
    outside the batch untouched; with and without destination slots (-1 skips)."""
    from sglang_ddtree.kernels import tree_cuda

    if tree_cuda.available() is not None:
        pytest.skip(f"CUDA tree kernels unavailable: {tree_cuda.available()}")
    L, H, HV, K, V, W, n, P = 3, 16, 48, 128, 128, 4, 17, 16
    C = 2 * H * K + HV * V
    bs, n_slots = 3, 6
    slots = torch.tensor([4, 0, 2], device="cuda")
    u = torch.randn(L, bs, n, HV, V, device="cuda")
    G = -torch.rand(L, bs, n, HV, device="cuda").cumsum(2) * 0.1
    x = torch.randn(L, bs * n, C, device="cuda").to(dtype)
    state = torch.randn(L, n_slots, HV, V, K, device="cuda") * 0.3
    conv = torch.randn(L, n_slots, W - 1, C, device="cuda").to(dtype).transpose(2, 3)  # sglang: channel-fastest
    w = [(torch.randn(C, W, device="cuda") * 0.5).to(dtype) for _ in range(L)]
    bias = [(torch.randn(C, device="cuda") * 0.1).to(dtype) for _ in range(L)] if with_bias else [None] * L
    w_tab, b_tab = conv_weight_tables(w, bias, dtype, "cuda")
    # Paths of 1, 3 and 16 nodes (the root alone; a short path; the longest, past the conv window).
    accepted = torch.full((bs, P), -1, dtype=torch.int64, device="cuda")
    accepted[0, 0] = 0
    accepted[1, :3] = torch.tensor([0, 4, 9])
    accepted[2, :] = torch.arange(P)
    accept_len = torch.tensor([0, 2, P - 1], device="cuda")
    for dst in (None, torch.tensor([5, -1, 1], device="cuda")):
        st_tr, st_cu = state.clone(), state.clone()
        tree_gdn_commit_from_x_layers(st_tr, slots, u, G, x, w_tab, b_tab, W, conv, H * K, H, accepted,
                                      accept_len, dst_idx=dst)
        tree_cuda.gdn_tree_commit_from_x_layers(st_cu, slots, u, G, x, w_tab, b_tab, W, conv, H * K, H, accepted,
                                                accept_len, dst_idx=dst)
        assert not torch.isnan(st_cu).any()
        assert rel(st_cu, st_tr.double().cpu()) < 1e-6, rel(st_cu, st_tr.double().cpu())
        written = [5, 1] if dst is not None else slots.tolist()
        rest = [i for i in range(n_slots) if i not in written]
        assert torch.equal(st_cu[:, rest], state[:, rest])
        assert not torch.equal(st_cu[:, written], state[:, written])
