"""Tree GDN references (``kernels/gdn_tree/naive.py``): the tree-WY form and the commit against
the per-path float64 recurrence; the vectorised tree conv and the conv commit against the
per-path conv.

Fresh random inputs every run; tree shapes include chains, stars, deep trees and random trees.
Tolerances: float64 WY vs float64 path recurrence 1e-10 relative (same algebra, different order);
float32 WY on bf16-rounded inputs vs float64 on the same inputs 1e-4 relative (reported).
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from gdn_cases import gdn_inputs, trees
from sglang_ddtree.kernels.gdn_tree.naive import (
    conv_commit_state, conv_tree, conv_tree_path_reference, gdn_commit_state, gdn_tree_path_reference,
    gdn_tree_wy, path_of,
)


def _tree(kind: str, n: int, rng: random.Random) -> torch.Tensor:
    if kind == "chain":
        par = [i - 1 for i in range(n)]
    elif kind == "star":
        par = [-1] + [0] * (n - 1)
    elif kind == "deep":  # a long chain with short side branches
        par = [-1] + [i - 1 if i % 3 else max(0, i - 2) for i in range(1, n)]
    else:
        par = [-1] + [rng.randrange(0, i) for i in range(1, n)]
    return torch.tensor(par)


def _inputs(n, h=2, r=2, dk=16, dv=8, seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else random.randrange(1 << 30))
    hv = h * r
    q = F.normalize(torch.randn(n, h, dk, generator=g), dim=-1)
    k = F.normalize(torch.randn(n, h, dk, generator=g), dim=-1)
    v = torch.randn(n, hv, dv, generator=g)
    gate = -torch.rand(n, hv, generator=g) * 0.5 - 0.01  # log decay in (-0.51, -0.01)
    beta = torch.rand(n, hv, generator=g)
    S0 = torch.randn(hv, dk, dv, generator=g) * 0.5
    return q, k, v, gate, beta, S0


def _rel(a, b):
    return float((a - b).norm() / b.norm().clamp(min=1e-30))


@pytest.mark.parametrize("kind,n", [("chain", 16), ("star", 33), ("deep", 65), ("random", 65), ("random", 129)])
def test_tree_wy_equals_path_recurrence_float64(kind, n):
    rng = random.Random()
    parent = _tree(kind, n, rng)
    q, k, v, g, beta, S0 = _inputs(n)
    scale = q.shape[-1] ** -0.5
    ref_o, ref_states = gdn_tree_path_reference(q, k, v, g, beta, parent, S0, scale)
    o, u, G = gdn_tree_wy(q, k, v, g, beta, parent, S0, scale, dtype=torch.float64)
    assert not o.isnan().any()
    assert _rel(o, ref_o) < 1e-10
    # Commit along a random root-to-node path rebuilds exactly that node's state.
    for node in (n - 1, rng.randrange(n)):
        path = torch.tensor(path_of(parent, node))
        S = gdn_commit_state(k, u, G, path, S0, dtype=torch.float64)
        assert _rel(S, ref_states[node]) < 1e-10


@pytest.mark.parametrize("kind,n", [("random", 65), ("chain", 16), ("random", 257)])
def test_tree_wy_float32_error_on_bf16_inputs(kind, n):
    parent = _tree(kind, n, random.Random())
    q, k, v, g, beta, S0 = _inputs(n, h=2, r=3, dk=32, dv=32)
    # bf16 inputs as the model produces them; fp32 state.
    q, k, v = (F.normalize(x.bfloat16().float(), dim=-1) if x is not v else x.bfloat16().float() for x in (q, k, v))
    scale = q.shape[-1] ** -0.5
    ref_o, ref_states = gdn_tree_path_reference(q, k, v, g, beta, parent, S0, scale)
    o, u, G = gdn_tree_wy(q, k, v, g, beta, parent, S0, scale, dtype=torch.float32)
    err = _rel(o.double(), ref_o)
    print(f"tree-WY fp32 rel err ({kind}, N={n}): {err:.2e}")
    assert err < 1e-4
    path = torch.tensor(path_of(parent, n - 1))
    assert _rel(gdn_commit_state(k, u, G, path, S0).double(), ref_states[n - 1]) < 1e-4


@pytest.mark.parametrize("kind", ["deep", "random"])
def test_tree_wy_float32_with_strong_decays_between_branches(kind):
    """Real gates reach g ~ -20 per token: exp(G_t - G_s) between branches overflows fp32, and
    the reference must not turn inf * 0 into NaN (only ancestor pairs contribute)."""
    n = 65
    parent = _tree(kind, n, random.Random())
    q, k, v, g, beta, S0 = _inputs(n)
    g = g * 40.0  # log decays in (-20.4, -0.4)
    scale = q.shape[-1] ** -0.5
    ref_o, _ = gdn_tree_path_reference(q, k, v, g, beta, parent, S0, scale)
    o, _, _ = gdn_tree_wy(q, k, v, g, beta, parent, S0, scale, dtype=torch.float32)
    assert torch.isfinite(o).all()
    assert _rel(o.double(), ref_o) < 1e-5


def test_tree_wy_float32_with_a_real_models_gates_stays_finite():
    """The kernels' inputs with gates as strong as a real model's (raw gate input + 20: g ~ -20
    per token), normalised q/k, on a bushy builder tree: the fp32 WY form stays finite."""
    n, K = 40, 16
    parent = trees(n)[2][0]
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(1, n, 2, 4, K, 16, torch.float32)
    o32, _, _ = gdn_tree_wy(
        q / torch.sqrt((q ** 2).sum(-1, keepdim=True) + 1e-6), k / torch.sqrt((k ** 2).sum(-1, keepdim=True) + 1e-6),
        v, -torch.exp(A_log) * F.softplus(a + 20.0 + dt_bias), torch.sigmoid(b), parent, state[0].transpose(-1, -2),
        K ** -0.5)
    assert torch.isfinite(o32).all()


def test_wy_root_only_is_one_recurrent_step():
    q, k, v, g, beta, S0 = _inputs(1)
    parent = torch.tensor([-1])
    o, u, G = gdn_tree_wy(q, k, v, g, beta, parent, S0, 0.25, dtype=torch.float64)
    ref_o, _ = gdn_tree_path_reference(q, k, v, g, beta, parent, S0, 0.25)
    assert _rel(o, ref_o) < 1e-12


@pytest.mark.parametrize("kind,n", [("chain", 2), ("chain", 9), ("star", 7), ("random", 40)])
def test_tree_conv_and_commit(kind, n):
    rng = random.Random()
    parent = _tree(kind, n, rng)
    c, w = 6, 4
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    x = torch.randn(n, c, generator=gen)
    weight = torch.randn(c, w, generator=gen)
    bias = torch.randn(c, generator=gen)
    state = torch.randn(c, w - 1, generator=gen)
    ref = conv_tree_path_reference(x, weight, bias, state, parent)
    out = conv_tree(x, weight, bias, state, parent)
    assert _rel(out.double(), ref) < 1e-6
    node = rng.randrange(n)
    path = torch.tensor(path_of(parent, node))
    new_state = conv_commit_state(x, state, path)
    # The committed state continues the sequence: one more token after it equals running the
    # path plus that token from the old state.
    nxt = torch.randn(1, c, generator=gen)
    x_ext = torch.cat([x, nxt], 0)
    parent_ext = torch.cat([parent, torch.tensor([node])])
    ref_next = conv_tree_path_reference(x_ext, weight, bias, state, parent_ext)[-1]
    got_next = conv_tree(nxt, weight, bias, new_state, torch.tensor([-1]))[0]
    assert _rel(got_next.double(), ref_next) < 1e-6
