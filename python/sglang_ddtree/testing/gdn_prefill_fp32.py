"""Test-only: a float32 GatedDeltaNet prefill in plain torch, for the tiny hybrid's float32 checks on CUDA.

sglang's chunked prefill kernel (``chunk_gated_delta_rule``) refuses float32 inputs; the test
plugin's float32 route (:mod:`.fp32_norms`) sends a float32 prefill here instead, so that a float32
server computes its prompt's recurrent state in float32 throughout (a bf16 prefill would put bf16
rounding into both servers of a check, batch-shape dependent, where the check is meant to be sharp).

Contract (the one ``TritonGDNKernel.extend`` meets; ``T`` tokens of ``N`` sequences, varlen):

    q, k         [1, T, H, K]     raw; L2-normalised here (eps 1e-6, as sglang's kernel)
    v            [1, T, HV, V]    HV a multiple of H: value head h reads key head h // (HV // H)
    g, beta      [1, T, HV]       log decay and write strength, already gated
    ssm_states   [slots, HV, V, K] state pool (sglang's transposed layout); slot ``cache_indices[i]``
                                  is read as sequence i's initial state and overwritten with its
                                  final state; other slots are untouched
    cache_indices [N]             one slot per sequence, distinct, non-negative
    cu_seqlens   [N + 1]          token offsets (host-synchronising: prefill only, never in a graph)

Returns ``o [1, T, HV, V]`` float32. Per value head, state ``S [K, V]``, token t:
``S = exp(g_t) S + beta_t k_t (v_t - exp(g_t) S^T k_t)^T``, ``o_t = S^T (scale q_t)``, computed in
chunks of ``chunk`` tokens by the WY form of ``kernels/gdn_tree/naive.py`` on a chain (decays taken
as differences of in-chunk cumulative sums, never of whole-prompt sums). Sequences are padded to a
common length with ``g = beta = 0`` and zero keys, which leave the state unchanged.
"""

from __future__ import annotations

from typing import Optional

import torch


def _l2norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def chunk_gdn_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                      ssm_states: torch.Tensor, cache_indices: torch.Tensor, cu_seqlens: torch.Tensor,
                      scale: Optional[float] = None, chunk: int = 64, eps: float = 1e-6,
                      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The module's contract, computed in ``dtype``. Raises ValueError on shapes or indices outside it."""
    if q.dim() != 4 or q.shape[0] != 1 or v.dim() != 4 or v.shape[:2] != q.shape[:2] or k.shape != q.shape:
        raise ValueError(f"q, k [1, T, H, K] and v [1, T, HV, V] expected; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    T, H, K = q.shape[1:]
    HV, V = v.shape[2:]
    if HV % H or g.shape != (1, T, HV) or beta.shape != (1, T, HV):
        raise ValueError(f"g, beta [1, {T}, {HV}] and HV a multiple of H={H} expected; got "
                         f"{tuple(g.shape)}, {tuple(beta.shape)}")
    if ssm_states.dim() != 4 or tuple(ssm_states.shape[1:]) != (HV, V, K):
        raise ValueError(f"ssm_states [slots, {HV}, {V}, {K}] expected; got {tuple(ssm_states.shape)}")
    starts = [int(x) for x in cu_seqlens.tolist()]
    n = len(starts) - 1
    slots = cache_indices.to(torch.long)
    if slots.shape != (n,) or starts[0] != 0 or starts[-1] != T or any(b < a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"cu_seqlens from 0 to T={T} ascending and {n} cache indices expected; got "
                         f"{starts[:8]}..., {tuple(cache_indices.shape)}")
    if n and (int(slots.min()) < 0 or int(slots.max()) >= ssm_states.shape[0] or slots.unique().numel() != n):
        raise ValueError(f"cache_indices must be distinct slots in [0, {ssm_states.shape[0]}); got {slots.tolist()[:8]}")
    dev = q.device
    out = torch.zeros(T, HV, V, dtype=dtype, device=dev)
    if n == 0 or T == 0:
        return out.unsqueeze(0)
    if scale is None:
        scale = K ** -0.5
    lens = [b - a for a, b in zip(starts, starts[1:])]
    L = -(-max(lens) // chunk) * chunk
    # [n, L] token index of each padded position; T (a zero row appended below) for padding.
    pos = torch.arange(L, device=dev)
    first = torch.tensor(starts[:-1], device=dev)
    length = torch.tensor(lens, device=dev)
    real = pos.unsqueeze(0) < length.unsqueeze(1)
    idx = torch.where(real, first.unsqueeze(1) + pos.unsqueeze(0), torch.full_like(real, T, dtype=torch.long))

    def padded(x: torch.Tensor) -> torch.Tensor:  # [T, ...] -> [n, L, ...] with zero padding
        return torch.cat([x, x.new_zeros((1,) + tuple(x.shape[1:]))])[idx]

    r = HV // H
    qh = (_l2norm(q[0].to(dtype), eps) * scale).repeat_interleave(r, dim=1)  # [T, HV, K]
    kh = _l2norm(k[0].to(dtype), eps).repeat_interleave(r, dim=1)
    Q = padded(qh).permute(0, 2, 1, 3)  # [n, HV, L, K]
    Kt = padded(kh).permute(0, 2, 1, 3)
    Vt = padded(v[0].to(dtype)).permute(0, 2, 1, 3)  # [n, HV, L, V]
    Gt = padded(g[0].to(dtype)).permute(0, 2, 1)  # [n, HV, L]
    Bt = padded(beta[0].to(dtype)).permute(0, 2, 1)
    S = ssm_states[slots].to(dtype).transpose(-1, -2)  # [n, HV, K, V]
    O = torch.empty(n, HV, L, V, dtype=dtype, device=dev)
    incl = torch.ones(chunk, chunk, dtype=torch.bool, device=dev).tril()
    strict = incl.clone().fill_diagonal_(False).to(dtype)
    eye = torch.eye(chunk, dtype=dtype, device=dev)
    for c0 in range(0, L, chunk):
        sl = slice(c0, c0 + chunk)
        q_, k_, v_, b_ = Q[:, :, sl], Kt[:, :, sl], Vt[:, :, sl], Bt[:, :, sl]
        G = Gt[:, :, sl].cumsum(-1)  # [n, HV, C]
        diff = G.unsqueeze(-1) - G.unsqueeze(-2)  # [n, HV, C(t), C(s)]
        ratio = torch.exp(torch.where(incl, diff, torch.full_like(diff, float("-inf"))))
        A = b_.unsqueeze(-1) * ratio * (k_ @ k_.transpose(-1, -2)) * strict
        rhs = b_.unsqueeze(-1) * (v_ - torch.exp(G).unsqueeze(-1) * (k_ @ S))
        u = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        O[:, :, sl] = torch.exp(G).unsqueeze(-1) * (q_ @ S) + ((q_ @ k_.transpose(-1, -2)) * ratio) @ u
        w = torch.exp(G[..., -1:] - G)  # [n, HV, C]
        S = torch.exp(G[..., -1]).unsqueeze(-1).unsqueeze(-1) * S + (k_ * w.unsqueeze(-1)).transpose(-1, -2) @ u
    out[idx[real]] = O.permute(0, 2, 1, 3)[real]
    ssm_states[slots] = S.transpose(-1, -2).to(ssm_states.dtype)
    return out.unsqueeze(0)
