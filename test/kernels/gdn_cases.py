"""Shared by the tree GatedDeltaNet kernel tests: where the kernels run, the trees and inputs they
are checked on, and the float64 path-by-path reference of a batch.

Without a GPU the kernels run in the Triton interpreter (numpy), so shapes stay small, and every
load and store they make is checked to fall inside a tensor argument of its launch
(``testing.triton_interpreter.patch_bounds_check``). The
interpreter must be switched on before triton is first imported (it changes how triton's own
library is built), so on CPU each kernel test file re-runs itself in a child process with
``TRITON_INTERPRET=1`` (its ``test_in_triton_interpreter``, made by :func:`interpreter_test`);
with a GPU the same tests run compiled, in process. Fresh random inputs every run; outputs are
poisoned (NaN) first where a test needs every element written.

Tolerances (max abs error relative to the reference's max abs value): fp32 inputs 2e-5 (IEEE
fp32 dots; measured ~3e-7 in the interpreter, the rest is accumulation order), bf16 inputs
1e-2 (the reference uses the same bf16-rounded inputs in float64, so what remains is the
kernel's fp32 arithmetic and the bf16 rounding of its output: measured ~4e-3). Using the
causal mask instead of the ancestor mask gives ~0.9, so the checks see tree-structure errors.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from sglang_ddtree.config import TRITON_INTERP_CHILD
from sglang_ddtree.core.tree_builder import build_tree, pad_tree
from sglang_ddtree.core.verify_layout import build_verify_layout
from sglang_ddtree.kernels.gdn_tree import naive
from sglang_ddtree.testing.triton_interpreter import patch_bounds_check, patch_scalar_index

HAS_CUDA = torch.cuda.is_available()
CHILD_ENV = TRITON_INTERP_CHILD.name
IN_CHILD = bool(TRITON_INTERP_CHILD.get())
DEV = "cuda" if HAS_CUDA else "cpu"


if IN_CHILD and os.environ.get("TRITON_INTERPRET") == "1":
    patch_scalar_index()
    patch_bounds_check()  # every load and store of the kernels under test inside their tensors

kernels_here = pytest.mark.skipif(
    not (HAS_CUDA or IN_CHILD), reason="runs compiled on a GPU, or in the interpreter child process"
)


def interpreter_test(path: str):
    """The CPU entry point of the kernel test file ``path``: runs that file in a child process
    under the Triton interpreter and fails with its output unless every test there passes or
    skips and at least one passes."""

    @pytest.mark.skipif(HAS_CUDA or IN_CHILD, reason="the CPU entry point; runs this file in the interpreter")
    def test_in_triton_interpreter():
        env = dict(os.environ, TRITON_INTERPRET="1", **{CHILD_ENV: "1"})
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.abspath(path)],
            env=env, capture_output=True, text=True, timeout=1200,
        )
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
        assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]

    return test_in_triton_interpreter


# ----------------------------------------------------------------------------- trees


def explicit(parents, n):
    """A layout-like (parent [N], anc [N, N]) from a parent list, padded to n nodes."""
    p = torch.full((n,), -1, dtype=torch.int64)
    p[: len(parents)] = torch.tensor(parents)
    return p, naive.ancestor_mask(p)


def from_builder(budget, width, K, seed):
    g = torch.Generator().manual_seed(seed)
    L = 15
    lp = torch.randn(1, L, K, generator=g).sort(-1, descending=True).values.log_softmax(-1)
    ids = torch.randint(0, 1000, (1, L, K), generator=g)
    tree = pad_tree(build_tree(lp, ids, budget, None, L), width - 1)  # padded like the worker's
    lay = build_verify_layout(tree, torch.tensor([1]), torch.tensor([5]), L)
    return lay.parent[0], lay.ancestor_mask[0]


def trees(n):
    """Chains, a star, a deep-and-bushy builder tree, a padded builder tree: all with n nodes."""
    return [
        explicit(list(range(-1, n - 1)), n),                       # chain
        explicit([-1] + [0] * (n - 1), n),                          # star
        from_builder(n - 1, n, 4, seed=int(torch.randint(0, 10**6, ()))),   # best-first tree
        from_builder(max(1, n // 2 - 1), n, 3, seed=int(torch.randint(0, 10**6, ()))),  # + padding
    ]


# ----------------------------------------------------------------------------- GDN


def gdn_inputs(bs, n, H, HV, K, V, dtype, slots=5):
    T = bs * n
    q = torch.randn(T, H, K).to(dtype)
    k = torch.randn(T, H, K).to(dtype)
    v = torch.randn(T, HV, V).to(dtype)
    a = torch.randn(T, HV).to(dtype)
    b = torch.randn(T, HV).to(dtype)
    A_log = torch.randn(HV) * 0.5
    dt_bias = torch.randn(HV) * 0.5
    state = torch.randn(slots, HV, V, K) * 0.3
    return q, k, v, a, b, A_log, dt_bias, state


def reference(q, k, v, a, b, A_log, dt_bias, parents, S0s, scale):
    """float64, request by request, path by path."""
    n = parents[0].numel()
    outs, states = [], []
    g = (-torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double()))
    beta = torch.sigmoid(b.double())
    for r, par in enumerate(parents):
        sl = slice(r * n, (r + 1) * n)
        qn = q[sl].double() / torch.sqrt((q[sl].double() ** 2).sum(-1, keepdim=True) + 1e-6)
        kn = k[sl].double() / torch.sqrt((k[sl].double() ** 2).sum(-1, keepdim=True) + 1e-6)
        o, st = naive.gdn_tree_path_reference(qn, kn, v[sl], g[sl], beta[sl], par, S0s[r].transpose(-1, -2), scale)
        outs.append(o)
        states.append(st)
    return torch.cat(outs), states


def rel(x, ref):
    assert not torch.isnan(x).any(), "NaN in kernel output (an element was not written)"
    return float((x.double().cpu() - ref).abs().max() / ref.abs().max().clamp(min=1e-30))
