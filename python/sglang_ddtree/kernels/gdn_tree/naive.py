"""Tree-aware GatedDeltaNet (GDN) without per-node state snapshots: plain-torch references.

One reference per kernel stage, and a ground truth that runs the recurrence path by path:

- verify (:mod:`.verify`): :func:`gdn_tree_wy`; ground truth :func:`gdn_tree_path_reference`;
- state commit (:mod:`.commit`): :func:`gdn_commit_state` (ground truth: the path reference's states);
- tree conv (:mod:`.conv`): :func:`conv_tree`; ground truth :func:`conv_tree_path_reference`;
- conv commit (:mod:`.conv`): :func:`conv_commit_state`.

These take one request, normalised keys and the state as ``[HV, K, V]``; the kernels take a
batch, raw q/k, raw gate inputs and sglang's pools.

One request's verify tree has N nodes in topological order (``parent[i] < i``; node 0 is the
root, whose parent -1 stands for the committed state). Per value head, with decay
``a_t = exp(g_t)``, write strength ``beta_t``, key ``k_t`` (L2-normalised by the caller, as
sglang's ``use_qk_l2norm_in_kernel`` does), value ``v_t``, state ``S`` of shape ``[K, V]``:

    S_t = a_t S_par(t) + beta_t k_t (v_t - a_t S_par(t)^T k_t)^T,    o_t = S_t^T (scale * q_t)

where ``S_par(root)`` is the committed state ``S0``. Node t's state depends only on its path.

Tree WY form (what the fast kernels implement). With ``G_t`` = sum of g over t's path
(root..t inclusive) and ``anc(t)`` the proper ancestors of t:

    (I + A) u = beta * (v - exp(G) * (S0^T k)),   A[t, s] = beta_t exp(G_t - G_s) (k_t . k_s), s in anc(t)
    o_t = exp(G_t) S0^T q_t + sum_{s in anc(t) + t} exp(G_t - G_s) (q_t . k_s) u_s
    S_t = exp(G_t) S0 + sum_{s in anc(t) + t} exp(G_t - G_s) k_s u_s^T      (the commit)

``A`` is strictly lower triangular in node order, so one triangular solve gives every node.

Grouped heads: ``q``/``k`` have H heads, ``v``/``g``/``beta`` have HV = H * r heads; value
head h reads query/key head ``h // r`` (sglang's Qwen3.5 layout: 16 QK heads, 48 V heads).

Shapes (one request): q, k ``[N, H, K]``; v ``[N, HV, V]``; g, beta ``[N, HV]``;
S0 ``[HV, K, V]``; parent ``[N]`` int64. Outputs o ``[N, HV, V]``; states ``[HV, K, V]``.
(sglang's pools store the state transposed, ``[HV, V, K]``; adapters transpose.)

The short causal conv over the q/k/v projections works the same way on the tree: node t's
window is (ancestor_3, ancestor_2, ancestor_1, t) with the committed conv state filling in
above the root, and after acceptance the new conv state is the last ``W - 1`` inputs along the
accepted path.
"""

from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F


def _expand_heads(x: torch.Tensor, hv: int) -> torch.Tensor:
    """[N, H, D] -> [N, HV, D] by repeating each QK head for its group of value heads."""
    return x.repeat_interleave(hv // x.shape[1], dim=1)


def path_of(parent: torch.Tensor, node: int) -> List[int]:
    """Root-to-node path (node indices)."""
    path = [node]
    while int(parent[path[-1]]) >= 0:
        path.append(int(parent[path[-1]]))
    return path[::-1]


def ancestor_mask(parent: torch.Tensor) -> torch.Tensor:
    """``[N, N]`` bool: row t marks t and its ancestors (parents precede children)."""
    n = parent.numel()
    m = torch.eye(n, dtype=torch.bool, device=parent.device)
    for t in range(n):
        p = int(parent[t])
        if p >= 0:
            m[t] |= m[p]
    return m


# ----------------------------------------------------------------------------- recurrent GDN


def gdn_tree_path_reference(q, k, v, g, beta, parent, S0, scale: float):
    """Ground truth: run the recurrence separately along every root-to-node path, float64.

    Returns (o ``[N, HV, V]``, per-node states ``[N, HV, K, V]``), both float64.
    """
    n, hv = v.shape[0], v.shape[1]
    qd = _expand_heads(q.double(), hv) * scale
    kd = _expand_heads(k.double(), hv)
    vd, gd, bd = v.double(), g.double(), beta.double()
    out = torch.empty(n, hv, v.shape[2], dtype=torch.float64)
    states = torch.empty(n, *S0.shape, dtype=torch.float64)
    for node in range(n):
        S = S0.double().clone()
        for t in path_of(parent, node):
            a = torch.exp(gd[t]).view(hv, 1, 1)
            S = a * S
            pred = torch.einsum("hkv,hk->hv", S, kd[t])
            S = S + bd[t].view(hv, 1, 1) * torch.einsum("hk,hv->hkv", kd[t], vd[t] - pred)
        states[node] = S
        out[node] = torch.einsum("hkv,hk->hv", S, qd[node])
    return out, states


def gdn_tree_wy(q, k, v, g, beta, parent, S0, scale: float, dtype=torch.float32):
    """Tree WY form in plain torch (the reference for the fast kernels).

    Computes in ``dtype`` (float32 for the kernels' contract, float64 to check the algebra).
    Returns o ``[N, HV, V]`` and the WY factors (u ``[N, HV, V]``, G ``[N, HV]``) the commit needs.
    """
    n, hv = v.shape[0], v.shape[1]
    qd = _expand_heads(q.to(dtype), hv) * scale  # [N, HV, K]
    kd = _expand_heads(k.to(dtype), hv)
    vd, gd, bd = v.to(dtype), g.to(dtype), beta.to(dtype)
    S0d = S0.to(dtype)
    anc = ancestor_mask(parent).to(dtype)  # [N, N], self included
    strict = anc - torch.eye(n, dtype=dtype)
    G = anc @ gd  # [N, HV] path sums of g
    # Per head: decay ratios exp(G_t - G_s) on ancestor pairs, 0 elsewhere. (Unmasked, the
    # ratio between branches overflows with real gates, and inf * 0 is NaN.)
    Gh = G.t()  # [HV, N]
    diff = Gh.unsqueeze(2) - Gh.unsqueeze(1)  # [HV, N(t), N(s)]
    ratio = torch.exp(torch.where(anc.bool().unsqueeze(0), diff, torch.full_like(diff, float("-inf"))))
    kk = torch.einsum("thd,shd->hts", kd, kd)
    A = bd.t().unsqueeze(2) * ratio * kk * strict.unsqueeze(0)
    rhs = bd.unsqueeze(-1) * (vd - torch.exp(G).unsqueeze(-1) * torch.einsum("hkv,thk->thv", S0d, kd))
    eye = torch.eye(n, dtype=dtype).expand(hv, n, n)
    u = torch.linalg.solve_triangular(eye + A, rhs.transpose(0, 1), upper=False, unitriangular=True)
    u = u.transpose(0, 1)  # [N, HV, V]
    qk = torch.einsum("thd,shd->hts", qd, kd) * ratio * anc.unsqueeze(0)
    o = torch.exp(G).unsqueeze(-1) * torch.einsum("hkv,thk->thv", S0d, qd)
    o = o + torch.einsum("hts,shv->thv", qk, u)
    return o, u, G


def gdn_commit_state(k, u, G, path: torch.Tensor, S0, dtype=torch.float32):
    """State after accepting ``path`` (node indices, root first): at most L + 1 terms.

    ``S = exp(G_last) S0 + sum_{s in path} exp(G_last - G_s) k_s u_s^T``.
    """
    hv = u.shape[1]
    kd = _expand_heads(k.to(dtype), hv)[path]  # [P, HV, K]
    ud = u.to(dtype)[path]
    Gp = G.to(dtype)[path]  # [P, HV]
    last = Gp[-1]
    w = torch.exp(last.unsqueeze(0) - Gp)  # [P, HV]
    return torch.exp(last).view(hv, 1, 1) * S0.to(dtype) + torch.einsum("ph,phk,phv->hkv", w, kd, ud)


# ----------------------------------------------------------------------------- short conv


def conv_tree_path_reference(x, weight, bias, conv_state, parent, activation: bool = True,
                             round_products: bool = False):
    """Ground truth for the depthwise causal conv on a tree, float64, path by path.

    x ``[N, C]`` node inputs; weight ``[C, W]``; bias ``[C]`` or None; conv_state ``[C, W-1]``
    (oldest first). Returns ``[N, C]``. ``round_products``: each product is rounded to its
    operands' promoted dtype before the (float64) sum, as sglang's conv kernel rounds it (its
    bf16 loads are multiplied unwidened); the engine's greedy output follows that rounding.
    """
    n, c = x.shape
    w = weight.shape[1]
    out = torch.empty(n, c, dtype=torch.float64)
    px = torch.promote_types(x.dtype, weight.dtype)
    ps = torch.promote_types(conv_state.dtype, weight.dtype)
    for node in range(n):
        path = path_of(parent, node)
        seq = torch.cat([conv_state.double().t(), x.double()[path]], 0)
        window = seq[-w:]  # [W, C]
        prods = window.t() * weight.double()  # [C, W]; exact for bf16 / fp16 operands
        if round_products:
            from_x = torch.arange(w) >= w - len(path)  # window slots filled from the path
            prods = torch.where(from_x, prods.to(px).double(), prods.to(ps).double())
        y = prods.sum(-1)
        if bias is not None:
            y = y + bias.double()
        out[node] = F.silu(y) if activation else y
    return out


def conv_tree(x, weight, bias, conv_state, parent, activation: bool = True, dtype=torch.float32):
    """Vectorised tree conv: gather each node's ancestor window, one weighted sum."""
    n, c = x.shape
    w = weight.shape[1]
    # Window slot j (0 = oldest) of node t is its (w-1-j)-th ancestor; when the path runs out
    # above the root, the slot reads the committed state from the end backwards.
    seq = torch.cat([conv_state.to(dtype).t(), x.to(dtype)], 0)  # [W-1 + N, C]
    idx = torch.empty(n, w, dtype=torch.int64)
    for t in range(n):
        cur, depth_up = t, 0
        for j in range(w - 1, -1, -1):
            if cur >= 0:
                idx[t, j] = (w - 1) + cur
                cur = int(parent[cur])
            else:
                depth_up += 1
                idx[t, j] = (w - 1) - depth_up
    window = seq[idx]  # [N, W, C]
    y = (window * weight.to(dtype).t().unsqueeze(0)).sum(1)
    if bias is not None:
        y = y + bias.to(dtype)
    return F.silu(y) if activation else y


def conv_commit_state(x, conv_state, path: torch.Tensor):
    """New conv state after accepting ``path``: the last W-1 inputs along it (oldest first)."""
    w1 = conv_state.shape[1]
    seq = torch.cat([conv_state.t(), x[path].to(conv_state.dtype)], 0)
    return seq[-w1:].t().contiguous()
