"""Snapshot-free tree GDN Triton kernels vs float64 path-by-path references.

Without a GPU the kernels run in the Triton interpreter (numpy), so shapes stay small. The
interpreter must be switched on before triton is first imported (it changes how triton's own
library is built), so on CPU this file re-runs itself in a child process with
``TRITON_INTERPRET=1`` (``test_kernels_in_triton_interpreter``); with a GPU the same tests run
compiled, in process. Fresh random inputs every run; outputs are
poisoned (NaN) first so an element the kernel fails to write fails the test.

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
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from sglang_ddtree.core import gdn_tree
from sglang_ddtree.core.tree_builder import build_tree, pad_tree
from sglang_ddtree.core.verify_layout import build_verify_layout

HAS_CUDA = torch.cuda.is_available()
CHILD_ENV = "SGLANG_DDTREE_TRITON_INTERP_CHILD"
IN_CHILD = os.environ.get(CHILD_ENV) == "1"

kernels_here = pytest.mark.skipif(
    not (HAS_CUDA or IN_CHILD), reason="runs compiled on a GPU, or in the interpreter child process"
)


@pytest.fixture(scope="module")
def kern():
    import sglang_ddtree.kernels.gdn_tree_triton as m

    return m


DEV = "cuda" if HAS_CUDA else "cpu"


# ----------------------------------------------------------------------------- trees


def _explicit(parents, n):
    """A layout-like (parent [N], anc [N, N]) from a parent list, padded to n nodes."""
    p = torch.full((n,), -1, dtype=torch.int64)
    p[: len(parents)] = torch.tensor(parents)
    return p, gdn_tree.ancestor_mask(p)


def _from_builder(budget, width, K, seed):
    g = torch.Generator().manual_seed(seed)
    L = 15
    lp = torch.randn(1, L, K, generator=g).sort(-1, descending=True).values.log_softmax(-1)
    ids = torch.randint(0, 1000, (1, L, K), generator=g)
    tree = pad_tree(build_tree(lp, ids, budget, None, L), width - 1)  # padded like the worker's
    lay = build_verify_layout(tree, torch.tensor([1]), torch.tensor([5]), L)
    return lay.parent[0], lay.ancestor_mask[0]


def _trees(n):
    """Chains, a star, a deep-and-bushy builder tree, a padded builder tree: all with n nodes."""
    return [
        _explicit(list(range(-1, n - 1)), n),                       # chain
        _explicit([-1] + [0] * (n - 1), n),                          # star
        _from_builder(n - 1, n, 4, seed=int(torch.randint(0, 10**6, ()))),   # best-first tree
        _from_builder(max(1, n // 2 - 1), n, 3, seed=int(torch.randint(0, 10**6, ()))),  # + padding
    ]


# ----------------------------------------------------------------------------- GDN


def _gdn_inputs(bs, n, H, HV, K, V, dtype, slots=5):
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


def _reference(q, k, v, a, b, A_log, dt_bias, parents, S0s, scale):
    """float64, request by request, path by path."""
    n = parents[0].numel()
    outs, states = [], []
    g = (-torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double()))
    beta = torch.sigmoid(b.double())
    for r, par in enumerate(parents):
        sl = slice(r * n, (r + 1) * n)
        qn = q[sl].double() / torch.sqrt((q[sl].double() ** 2).sum(-1, keepdim=True) + 1e-6)
        kn = k[sl].double() / torch.sqrt((k[sl].double() ** 2).sum(-1, keepdim=True) + 1e-6)
        o, st = gdn_tree.gdn_tree_path_reference(qn, kn, v[sl], g[sl], beta[sl], par, S0s[r].transpose(-1, -2), scale)
        outs.append(o)
        states.append(st)
    return torch.cat(outs), states


def _rel(x, ref):
    assert not torch.isnan(x).any(), "NaN in kernel output (an element was not written)"
    return float((x.double().cpu() - ref).abs().max() / ref.abs().max().clamp(min=1e-30))


# "ieee": exact fp32 products; "tf32x3": tensor-core products split in three tf32 parts (~fp32
# accuracy, faster on Hopper). The interpreter computes in numpy either way, so the second is
# only run compiled on a GPU.
PRECISIONS = ["ieee", "tf32x3"] if HAS_CUDA else ["ieee"]
# "+pdl": the apply pass launched as a programmatic dependent of the prep (a GPU launch mode).
IMPLS = ["fused", "split", "twostage", "twostage+pairs"] + (
    ["twostage+pdl", "twostage+pairs+pdl"] if HAS_CUDA else [])


def _impl(impl):
    """``tree_gdn_verify`` keywords of a test impl name: "twostage+pairs" forms the pair
    products inside the twostage prep kernel, plain "twostage" in the pair kernel (both forced:
    the default picks by tree size); "+pdl" launches the apply pass as a programmatic dependent
    (forced off without it: the default picks by grid size)."""
    name, *flags = impl.split("+")
    return dict(impl=name, pairs_in_prep="pairs" in flags, pdl="pdl" in flags)


DTYPES = [(torch.float32, 2e-5), (torch.bfloat16, 1e-2)]


def _impl_cases(sizes):
    """``(impl, size)`` pairs: on a GPU every impl at every size; in the CPU interpreter (the CI
    time budget) fused and split at every size, the twostage variants at the middle one (it
    has its own depth-bound and 65-node tests besides)."""
    if HAS_CUDA:
        return [(i, n) for i in IMPLS for n in sizes]
    mid = sizes[len(sizes) // 2]
    return [(i, n) for i in IMPLS for n in sizes if i in ("fused", "split") or n == mid]


@pytest.mark.parametrize("impl,n", _impl_cases([16, 23, 40]))
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dtype,tol", DTYPES)
@kernels_here
def test_tree_gdn_verify_and_commit_match_path_reference(kern, dtype, tol, n, precision, impl):
    _verify_and_commit_case(kern, dtype, tol, n, precision, impl)


def _verify_and_commit_case(kern, dtype, tol, n, precision, impl, K=32, V=32, gate_shift=0.0, state_tol=None,
                            **options):
    """Verify a batch of different trees and commit a different path per request, against the
    float64 path references. ``gate_shift`` is added to the raw gate input ``a``; the committed
    states are held to ``state_tol`` (default ``tol``)."""
    H, HV = 2, 4
    trees = _trees(n)
    bs = len(trees)  # a batch of different trees
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(bs, n, H, HV, K, V, dtype)
    a = a + gate_shift
    anc = torch.stack([t[1] for t in trees])
    parents = [t[0] for t in trees]
    slots = torch.tensor([3, 0, 4, 1])
    scale = K ** -0.5
    ref_o, ref_states = _reference(q, k, v, a, b, A_log, dt_bias, parents, state[slots], scale)

    dev_args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    st = state.clone().to(DEV)
    o, u, G = kern.tree_gdn_verify(*dev_args, st, slots.to(DEV), scale=scale, precision=precision, **_impl(impl),
                                   **options)
    assert o.dtype == dtype and o.shape == v.shape
    print(f"[tree_gdn] n={n} {dtype} {precision} {impl} {options}: o rel err {_rel(o, ref_o):.2e}")
    assert _rel(o, ref_o) < tol
    assert torch.equal(st.cpu(), state)  # verify never writes the state pool

    # Commit a different accepted path per request: the deepest node, a leaf, the root, a mid node.
    picks = []
    for r, par in enumerate(parents):
        depth = torch.tensor([len(gdn_tree.path_of(par, i)) for i in range(n)])
        picks.append([int(depth.argmax()), n - 1, 0, n // 2][r])
    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    for r, node in enumerate(picks):
        path = gdn_tree.path_of(parents[r], node)[:P]
        node = path[-1]
        picks[r] = node
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
    kern.tree_gdn_commit(st, slots.to(DEV), u, G, dev_args[1], accepted.to(DEV), accept_len.to(DEV))
    st = st.cpu()
    for r, node in enumerate(picks):
        want = ref_states[r][node].transpose(-1, -2)  # pool layout [HV, V, K]
        print(f"[tree_gdn]   committed state {r} rel err {_rel(st[slots[r]], want):.2e}")
        assert _rel(st[slots[r]], want) < (tol if state_tol is None else state_tol), (r, node, _rel(st[slots[r]], want))
    untouched = [i for i in range(state.shape[0]) if i not in slots.tolist()]
    assert torch.equal(st[untouched], state[untouched])


@pytest.mark.parametrize("impl,n", _impl_cases([16, 40]) if HAS_CUDA else [("fused", 40), ("twostage", 40), ("twostage+pairs", 40)])
@kernels_here
def test_bf16x3_products_are_fp32_accurate(kern, impl, n):
    """precision "bf16x3" with bf16 q/k and its fp32-accurate options (the solve in tf32x3, the
    state in three bf16 parts): the pair products of the raw rows in one bf16 pass and the
    state products over the split state must keep fp32 accuracy: the committed states (fp32,
    built from u and G) within 5e-6 of the float64 path reference (interpreter: ~1.5e-7, as
    "ieee"; with one bf16 part instead of three, 2e-5 .. 2e-4). The bf16 output within bf16
    rounding. (In the interpreter the same algebra runs on the exact fp32 values of the parts.)"""
    _verify_and_commit_case(kern, torch.bfloat16, 1e-2, n, "bf16x3", impl, state_tol=5e-6,
                            solve_precision="tf32x3", state_parts=3)


@pytest.mark.parametrize("impl", ["fused", "twostage"])
@kernels_here
def test_depth_bound_cuts_squarings_and_is_used(kern, impl):
    """``max_depth`` (the tree builder's depth limit) shortens each chunk's solve: right for
    trees within the bound, and really used — a chain deeper than a wrong bound comes out wrong.
    Strong coupling (one key for every node, beta ~ 1, no decay) makes a cut series far off; it
    is also the hard case for the solve by repeated squaring, whose terms count the paths
    through a chunk: with DDTree's paths (at most 16 nodes) it stays accurate (measured
    ~1e-4 relative in fp32; a 40-node chain in one 64-node chunk is not: ~3e3)."""
    H, HV, K, V, n = 1, 2, 16, 16, 65
    within = [_explicit(list(range(-1, 15)), n)] + [
        _from_builder(n - 1, n, 4, seed=int(torch.randint(0, 10**6, ()))) for _ in range(2)]
    for trees, bound, ok in ((within, 15, True), (within[:1], 4, False)):
        bs = len(trees)
        q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(bs, n, H, HV, K, V, torch.float32, slots=bs)
        k, a, b = k[:1].expand_as(k).contiguous(), a - 30.0, b + 6.0
        anc = torch.stack([t[1] for t in trees])
        slots = torch.arange(bs)
        ref_o, _ = _reference(q, k, v, a, b, A_log, dt_bias, [t[0] for t in trees], state[slots], K ** -0.5)
        o, *_ = kern.tree_gdn_verify(*[x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)], state.to(DEV),
                                     slots.to(DEV), precision="ieee", impl=impl, max_depth=bound)
        assert (_rel(o, ref_o) < 1e-3) == ok, (bound, _rel(o, ref_o))


@pytest.mark.skipif(not HAS_CUDA, reason="programmatic dependent launch is a GPU launch mode")
@pytest.mark.parametrize("n,pairs", [(17, False), (33, True), (65, True), (65, False)])
def test_pdl_apply_equals_the_plain_launch_under_graph_replay(kern, n, pairs):
    """``pdl=True`` only moves the apply pass's state products before its wait for the prep: the
    same arithmetic, so the outputs, u and G equal the plain launch's bit for bit — replayed from
    a CUDA graph, as the engine runs the verify, with fresh inputs copied in before the replay."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("PDL needs compute capability 9.0+")
    H, HV, K, V = 2, 6, 128, 128
    trees = [_from_builder(n - 1, n, 4, seed=int(torch.randint(0, 10**6, ()))) for _ in range(3)]
    anc = torch.stack([t[1] for t in trees]).cuda()
    args = [x.cuda() for x in _gdn_inputs(len(trees), n, H, HV, K, V, torch.bfloat16)]
    slots = torch.tensor([2, 0, 1], device="cuda")
    want = kern.tree_gdn_verify(*args[:7], anc, args[7], slots, impl="twostage", pairs_in_prep=pairs, max_depth=15,
                                pdl=False)
    fresh = [x.clone().uniform_(-1, 1) if x.dtype == torch.bfloat16 else x.clone() for x in args[:7]]
    static = [x.clone() for x in args[:7]]
    u_out, G_out = torch.empty_like(want[1]), torch.empty_like(want[2])
    run = lambda: kern.tree_gdn_verify(*static, anc, args[7], slots, impl="twostage", pairs_in_prep=pairs,
                                       max_depth=15, pdl=True, u_out=u_out, G_out=G_out)
    got = run()  # compiles outside the capture
    assert all(torch.equal(x, y) for x, y in zip(got, want))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o_graph, *_ = run()
    for dst, src in zip(static, fresh):
        dst.copy_(src)
    o_graph.fill_(float("nan"))
    u_out.fill_(float("nan"))
    g.replay()
    ref = kern.tree_gdn_verify(*fresh, anc, args[7], slots, impl="twostage", pairs_in_prep=pairs, max_depth=15,
                               pdl=False)
    assert torch.equal(o_graph, ref[0]) and torch.equal(u_out, ref[1]) and torch.equal(G_out, ref[2])


@kernels_here
def test_pdl_needs_a_gpu_that_has_it(kern, monkeypatch):
    """pdl=True where programmatic dependent launch cannot run is an error naming the switch, not
    a quiet plain launch."""
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(1, 17, 1, 2, 16, 16, torch.float32, slots=1)
    anc = _explicit(list(range(-1, 16)), 17)[1][None]
    args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)] + [state.to(DEV), torch.zeros(1, dtype=torch.int64, device=DEV)]
    if HAS_CUDA:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (8, 0))
    with pytest.raises(ValueError, match="SGLANG_DDTREE_WY_PDL"):
        kern.tree_gdn_verify(*args, impl="twostage", pdl=True)


def test_pdl_default_rule(monkeypatch):
    """``pdl=None`` launches the apply pass as a dependent only for "twostage" on a CUDA GPU of
    compute capability 9.0+ (never in the interpreter) and apply grids of at most three
    programs per SM (RESULTS.md session 11)."""
    from sglang_ddtree.kernels import gdn_tree_triton as kt

    class Props:
        multi_processor_count = 132

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *d: Props())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (9, 0))
    assert kt.apply_as_dependent("twostage", 396, "cuda")
    assert not kt.apply_as_dependent("twostage", 397, "cuda")
    assert not kt.apply_as_dependent("fused", 96, "cuda")
    assert not kt.apply_as_dependent("twostage", 96, "cpu")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (8, 9))
    assert not kt.apply_as_dependent("twostage", 96, "cuda")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (9, 0))
    assert not kt.apply_as_dependent("twostage", 96, "cuda")


@pytest.mark.parametrize("impl", ["twostage", "twostage+pairs"])
@kernels_here
def test_twostage_on_65_node_trees(kern, impl):
    """Full 64-node chunks (the default path of budget 64: the batch's trees include a 64-node
    chain and bushy trees), fp32 against the float64 path references."""
    _verify_and_commit_case(kern, torch.float32, 2e-5, 65, "ieee", impl)


@pytest.mark.parametrize("impl", ["fused", "split", "twostage"])
@kernels_here
def test_padded_rows_never_read_before_the_pool(kern, impl):
    """A CUDA-graph replay pads the batch with rows whose slot is sglang's PAD_SLOT_ID (-1). The
    verify and the tree conv must not read the memory before the pool for them (on the H200 an
    illegal address at 64 requests, session 11): that memory is NaN here, so a padded row that
    read it would come out NaN. Real rows are unchanged by the padded one."""
    H, HV, K, V, n = 1, 2, 16, 16, 17
    trees = _trees(n)[:2]
    parents = torch.stack([t[0] for t in trees]).to(DEV)
    anc = torch.stack([t[1] for t in trees]).to(DEV)
    q, k, v, a, b, A_log, dt_bias, state = (x.to(DEV) for x in _gdn_inputs(2, n, H, HV, K, V, torch.float32, slots=3))
    big = torch.full((4, HV, V, K), float("nan"), device=DEV)
    big[1:] = state  # slot -1 of the pool view is NaN
    padded = torch.tensor([2, -1], device=DEV)
    got = kern.tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, big[1:], padded, impl=impl, precision="ieee")
    want = kern.tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, torch.tensor([2, 0], device=DEV),
                                impl=impl, precision="ieee")
    for g, w in zip(got, want):
        assert not torch.isnan(g).any()
        assert torch.equal(g[: g.shape[0] // 2], w[: w.shape[0] // 2])
    C, W = 8, 4
    x = torch.randn(2 * n, C, device=DEV)
    weight = torch.randn(C, W, device=DEV)
    pool = torch.full((4, C, W - 1), float("nan"), device=DEV)
    pool[1:] = torch.randn(3, C, W - 1, device=DEV)
    for flat in (False, True):
        out = kern.tree_conv(x, weight, None, pool[1:], padded, parents, flat=flat)
        ref = kern.tree_conv(x, weight, None, pool[1:], torch.tensor([2, 0], device=DEV), parents, flat=flat)
        assert not torch.isnan(out).any() and torch.equal(out[:n], ref[:n])


@kernels_here
def test_twostage_refuses_trees_past_one_chunk(kern):
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(1, 70, 1, 2, 16, 16, torch.float32, slots=1)
    anc = _explicit(list(range(-1, 69)), 70)[1][None]
    with pytest.raises(ValueError, match="at most 65 nodes"):
        kern.tree_gdn_verify(*[x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)], state.to(DEV),
                             torch.zeros(1, dtype=torch.int64).to(DEV), impl="twostage")


def test_squarings_cover_the_longest_path(kern):
    # (I + A)^-1 = (I - A)(I + A^2)...(I + A^(2^m)) needs 2^(m+1) >= L for paths of L nodes.
    for block, path, want in [(16, None, 3), (64, None, 5), (64, 15, 3), (64, 16, 3), (64, 17, 4),
                              (32, None, 4), (16, 2, 0), (16, 3, 1), (16, 1, 0)]:
        assert kern._squarings(block, path) == want, (block, path)
    assert [kern.block_chunk(n) for n in (1, 9, 17, 18, 33, 65, 66, 257)] == [16, 16, 16, 32, 32, 64, 64, 64]


@kernels_here
def test_tree_gdn_deep_chain_and_wide_tree_fp32(kern):
    # A 16-deep chain (max DDTree depth) batched with a 64-node best-first tree (several node blocks).
    H, HV, K, V = 1, 2, 16, 16
    n = 64
    trees = [_explicit(list(range(-1, 15)), n), _from_builder(n - 1, n, 8, seed=7)]
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(2, n, H, HV, K, V, torch.float32, slots=2)
    anc = torch.stack([t[1] for t in trees])
    ref_o, _ = _reference(q, k, v, a, b, A_log, dt_bias, [t[0] for t in trees], state[[1, 0]], K ** -0.5)
    o, *_ = kern.tree_gdn_verify(*[x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)],
                                 state.to(DEV), torch.tensor([1, 0]).to(DEV))
    assert _rel(o, ref_o) < 2e-4


@kernels_here
def test_tree_gdn_rejects_bad_shapes(kern):
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(1, 8, 2, 4, 16, 16, torch.float32)
    anc = torch.eye(9, dtype=torch.bool).unsqueeze(0)  # 9 nodes but 8 tokens
    with pytest.raises(ValueError, match="tokens"):
        kern.tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, torch.tensor([0]))


# ----------------------------------------------------------------------------- conv


@pytest.mark.parametrize("flat", [False, True])
@kernels_here
def test_bf16_tree_conv_rounds_products_as_sglang_does(kern, flat):
    """bf16 inputs: each tap's product is rounded to bf16 before the fp32 sum (sglang's
    causal_conv1d_update multiplies its unwidened bf16 loads, and the plain decode uses it), so
    the outputs equal the float64 reference with rounded products, bf16-rounded, in all but a
    few elements (fp32 vs float64 summation), each at most one ulp off. The same reference with
    exact products differs in far more elements: the check can tell the two roundings apart."""
    C, W, n = 64, 4, 23
    trees = _trees(n)
    bs = len(trees)
    bf = torch.bfloat16
    x = torch.randn(bs * n, C).to(bf)
    weight = (torch.randn(C, W) * 0.5).to(bf)
    pool = torch.randn(5, C, W - 1).to(bf)  # window-fastest, as sglang 0.5.17 allocates it
    slots = torch.tensor([2, 4, 0, 3])
    parents = torch.stack([t[0] for t in trees])
    out = kern.tree_conv(x.to(DEV), weight.to(DEV), None, pool.to(DEV), slots.to(DEV), parents.to(DEV),
                         flat=flat).cpu().float()

    def ref(round_products):
        return torch.cat([gdn_tree.conv_tree_path_reference(x[r * n:(r + 1) * n], weight, None, pool[slots[r]],
                                                            parents[r], round_products=round_products)
                          for r in range(bs)]).to(bf).float()

    want, exact = ref(True), ref(False)
    assert not torch.isnan(out).any()
    off = (out != want).float().mean().item()
    assert off <= 2e-3, off
    assert ((out - want).abs() <= torch.finfo(bf).eps * want.abs() * 1.01).all()
    assert (exact != want).float().mean().item() > 10 * max(off, 1e-3)


@pytest.mark.parametrize("n,flat", [(16, False), (37, False), (37, True), (17, True)])
@kernels_here
def test_tree_conv_and_commit_match_path_reference(kern, n, flat):
    C, W = 48, 4
    trees = _trees(n)
    bs = len(trees)
    x = torch.randn(bs * n, C)
    weight = torch.randn(C, W)
    bias = torch.randn(C)
    # sglang's conv pool is channel-fastest: allocate [slots, W-1, C] and view it as [slots, C, W-1].
    pool = torch.randn(5, W - 1, C).transpose(1, 2)
    slots = torch.tensor([2, 4, 0, 3])
    parents = torch.stack([t[0] for t in trees])
    ref = torch.cat([gdn_tree.conv_tree_path_reference(x[r * n:(r + 1) * n], weight, bias, pool[slots[r]], parents[r])
                     for r in range(bs)])
    out = kern.tree_conv(x.to(DEV), weight.to(DEV), bias.to(DEV), pool.to(DEV), slots.to(DEV), parents.to(DEV),
                         flat=flat)
    assert _rel(out, ref) < 1e-5
    out_nb = kern.tree_conv(x.to(DEV), weight.to(DEV), None, pool.to(DEV), slots.to(DEV), parents.to(DEV),
                            activation=False, flat=flat)
    ref_nb = torch.cat([gdn_tree.conv_tree_path_reference(x[r * n:(r + 1) * n], weight, None, pool[slots[r]], parents[r], activation=False)
                        for r in range(bs)])
    assert _rel(out_nb, ref_nb) < 1e-5

    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    want = {}
    for r in range(bs):
        node = [n - 1, 0, n // 2, 1][r]
        path = gdn_tree.path_of(parents[r], node)[:P]
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
        want[r] = gdn_tree.conv_commit_state(x[r * n:(r + 1) * n], pool[slots[r]], torch.tensor(path))
    st = pool.clone().to(DEV)
    kern.tree_conv_commit(x.to(DEV), st, slots.to(DEV), accepted.to(DEV), accept_len.to(DEV))
    st = st.cpu()
    for r in range(bs):
        assert torch.equal(st[slots[r]], want[r]), r
    assert torch.equal(st[1], pool[1])  # a slot no request owns is untouched


@pytest.mark.parametrize("impl", IMPLS)
@kernels_here
def test_strong_decay_on_bushy_trees_stays_finite(kern, impl):
    """Gates as a real model produces them: g ~ -20 per token. Between nodes of *different*
    branches exp(G_t - G_s) overflows fp32 (the session-4 GPU failure of wy mode: NaN logits);
    only ancestor pairs may contribute, and there G_t - G_s <= 0. Verify and commit must match
    the float64 path reference."""
    _verify_and_commit_case(kern, torch.float32, 2e-5, 40, "ieee", impl, K=16, V=16, gate_shift=20.0)
    # The fp32 torch WY reference takes the same care.
    n, K = 40, 16
    parent = _trees(n)[2][0]
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(1, n, 2, 4, K, 16, torch.float32)
    o32, _, _ = gdn_tree.gdn_tree_wy(
        q / torch.sqrt((q ** 2).sum(-1, keepdim=True) + 1e-6), k / torch.sqrt((k ** 2).sum(-1, keepdim=True) + 1e-6),
        v, -torch.exp(A_log) * F.softplus(a + 20.0 + dt_bias), torch.sigmoid(b), parent, state[0].transpose(-1, -2),
        K ** -0.5)
    assert torch.isfinite(o32).all()


BLOCK_SHAPES = [(32, 32, 4), (16, 16, 4), (32, 64, 4), (16, 64, 8)]


@pytest.mark.parametrize("impl,shape", _impl_cases(BLOCK_SHAPES))
@kernels_here
def test_tree_gdn_verify_block_shapes(kern, impl, shape):
    """The tile sizes the benchmark sweeps give the same answer (fp32 inputs, ieee)."""
    block_t, block_v, num_warps = shape
    n, H, HV, K, V = 40, 2, 4, 32, 64
    trees = _trees(n)
    bs = len(trees)
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(bs, n, H, HV, K, V, torch.float32)
    anc = torch.stack([t[1] for t in trees])
    slots = torch.tensor([3, 0, 4, 1])
    scale = K ** -0.5
    ref_o, _ = _reference(q, k, v, a, b, A_log, dt_bias, [t[0] for t in trees], state[slots], scale)
    dev_args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    o, _, _ = kern.tree_gdn_verify(*dev_args, state.clone().to(DEV), slots.to(DEV), scale=scale, precision="ieee",
                                   block_t=block_t, block_v=block_v, num_warps=num_warps, **_impl(impl))
    assert _rel(o, ref_o) < 2e-5


@pytest.mark.skipif(HAS_CUDA or IN_CHILD, reason="the CPU entry point; runs this file in the interpreter")
def test_kernels_in_triton_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", **{CHILD_ENV: "1"})
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__).resolve())],
        env=env, capture_output=True, text=True, timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]


@pytest.mark.gpu
def test_cuda_commit_equals_triton_commit_and_reference(kern):
    from sglang_ddtree.kernels import tree_cuda

    if tree_cuda.available() is not None:
        pytest.skip(f"CUDA tree kernels unavailable: {tree_cuda.available()}")
    H, HV, K, V, n = 16, 48, 128, 128, 65  # Qwen3.6-27B GDN heads, budget 64
    trees = _trees(n)
    bs = len(trees)
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(bs, n, H, HV, K, V, torch.bfloat16)
    anc = torch.stack([t[1] for t in trees])
    parents = [t[0] for t in trees]
    slots = torch.tensor([3, 0, 4, 1])
    args = [x.cuda() for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    st0 = state.cuda()
    o, u, G = kern.tree_gdn_verify(*args, st0, slots.cuda())
    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    for r, par in enumerate(parents):
        path = gdn_tree.path_of(par, [n - 1, n // 3, 0, 5][r])[:P]
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
    st_tr, st_cu = st0.clone(), st0.clone()
    kern.tree_gdn_commit(st_tr, slots.cuda(), u, G, args[1], accepted.cuda(), accept_len.cuda())
    tree_cuda.gdn_tree_commit(st_cu, slots.cuda(), u, G, args[1], accepted.cuda(), accept_len.cuda())
    assert not torch.isnan(st_cu).any()
    torch.testing.assert_close(st_cu, st_tr, rtol=1e-5, atol=1e-5)
    _, ref_states = _reference(q, k, v, a, b, A_log, dt_bias, parents, state[slots], K ** -0.5)
    for r in range(bs):
        node = int(accepted[r, accept_len[r]])
        assert _rel(st_cu[slots[r]], ref_states[r][node].transpose(-1, -2)) < 1e-2


@kernels_here
def test_commits_over_stacked_layers_equal_one_launch_per_layer(kern):
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
            kern.tree_gdn_commit(st_one[l], slots, u[l], G[l], k[l], accepted, accept_len, dst_idx=dst)
            kern.tree_conv_commit(x[l], cv_one[l], slots, accepted, accept_len, dst_idx=dst)
        st_all, cv_all = state.clone(), conv.clone()
        kern.tree_gdn_commit_layers(st_all, slots, u, G, k, accepted, accept_len, dst_idx=dst)
        kern.tree_conv_commit_layers(x, cv_all, slots, accepted, accept_len, dst_idx=dst)
        assert torch.equal(st_all, st_one) and torch.equal(cv_all, cv_one)
        assert not torch.equal(st_all, state)  # something was written
        # Keys recomputed from x (what the engine runs; per-layer weights through address
        # tables) equal the commit from the keys the same conv makes.
        w = [(torch.randn(C, W, device=DEV) * 0.5).to(torch.bfloat16) for _ in range(L)]
        bias = [(torch.randn(C, device=DEV) * 0.1).to(torch.bfloat16) for _ in range(L)]
        # (The accepted paths 0-2-5 and 0-1 are root paths of these trees.)
        parent = torch.tensor([[-1, 0, 0, 1, 0, 2, 5, 3, 6], [-1, 0, 1, 2, 0, 4, 1, 6, 7]], device=DEV)
        keys = torch.stack([kern.tree_conv(x[l], w[l], bias[l], conv[l], slots, parent)[:, H * K: 2 * H * K]
                            for l in range(L)]).unflatten(-1, (H, K))
        st_k, st_x = state.clone(), state.clone()
        kern.tree_gdn_commit_layers(st_k, slots, u, G, keys.contiguous(), accepted, accept_len, dst_idx=dst)
        w_tab, b_tab = kern.conv_weight_tables(w, bias, torch.bfloat16, DEV)
        kern.tree_gdn_commit_from_x_layers(st_x, slots, u, G, x, w_tab, b_tab, W, conv, H * K, H, accepted,
                                           accept_len, dst_idx=dst)
        assert _rel(st_x, st_k.double().cpu()) < 1e-6
        written = [4] if dst is not None else slots.tolist()
        rest = [i for i in range(slots_n) if i not in written]
        assert torch.equal(st_all[:, rest], state[:, rest]) and torch.equal(cv_all[:, rest], conv[:, rest])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,with_bias", [(torch.bfloat16, True), (torch.bfloat16, False), (torch.float32, True)])
def test_cuda_from_x_commit_equals_triton(kern, dtype, with_bias):
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
    w_tab, b_tab = kern.conv_weight_tables(w, bias, dtype, "cuda")
    # Paths of 1, 3 and 16 nodes (the root alone; a short path; the longest, past the conv window).
    accepted = torch.full((bs, P), -1, dtype=torch.int64, device="cuda")
    accepted[0, 0] = 0
    accepted[1, :3] = torch.tensor([0, 4, 9])
    accepted[2, :] = torch.arange(P)
    accept_len = torch.tensor([0, 2, P - 1], device="cuda")
    for dst in (None, torch.tensor([5, -1, 1], device="cuda")):
        st_tr, st_cu = state.clone(), state.clone()
        kern.tree_gdn_commit_from_x_layers(st_tr, slots, u, G, x, w_tab, b_tab, W, conv, H * K, H, accepted,
                                           accept_len, dst_idx=dst)
        tree_cuda.gdn_tree_commit_from_x_layers(st_cu, slots, u, G, x, w_tab, b_tab, W, conv, H * K, H, accepted,
                                                accept_len, dst_idx=dst)
        assert not torch.isnan(st_cu).any()
        assert _rel(st_cu, st_tr.double().cpu()) < 1e-6, _rel(st_cu, st_tr.double().cpu())
        written = [5, 1] if dst is not None else slots.tolist()
        rest = [i for i in range(n_slots) if i not in written]
        assert torch.equal(st_cu[:, rest], state[:, rest])
        assert not torch.equal(st_cu[:, written], state[:, written])


# ----------------------------------------------------------------------------- wy mode (engine glue)


# bf16: 2e-2 of the reference's max (~5 bf16 unit roundoffs). The layer output is rounded to bf16
# after a verify from bf16 projections; over 60 fresh draws in the interpreter its error was
# 0.53% of the max at the median and 0.98% at worst, and one CI draw reached 1.002% (session 16),
# so 1e-2 failed on rounding alone. A wrong parent, term or slot is O(1); float32 checks the
# algebra to 2e-5.
@pytest.mark.parametrize("conv_layout,gate_shift", [("channel_fastest", 0.0), ("window_fastest", 12.0)])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 2e-2)])
@kernels_here
def test_wy_layer_verify_and_commit_match_references(kern, dtype, tol, conv_layout, gate_shift):
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
    trees = _trees(n)
    bs = len(trees)
    parents = torch.stack([t[0] for t in trees])
    anc = torch.stack([t[1] for t in trees])
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
        y = gdn_tree.conv_tree_path_reference(x[sl], w, None, conv_pool[slots[r]], parents[r], round_products=True)
        q, k, v = torch.split(y, [H * K, H * K, HV * V], dim=-1)
        qn, kn = q.view(n, H, K), k.view(n, H, K)
        qn = qn / torch.sqrt((qn ** 2).sum(-1, keepdim=True) + 1e-6)
        kn = kn / torch.sqrt((kn ** 2).sum(-1, keepdim=True) + 1e-6)
        o_r, st = gdn_tree.gdn_tree_path_reference(qn, kn, v.reshape(n, HV, V), g[sl], beta[sl], parents[r],
                                                   ssm[slots[r]].transpose(-1, -2).double(), K ** -0.5)
        ref_o.append(o_r)
        ref_states.append(st)
    assert _rel(o, torch.cat(ref_o)) < tol

    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    picks = []
    for r in range(bs):
        depth = torch.tensor([len(gdn_tree.path_of(parents[r], i)) for i in range(n)])
        path = gdn_tree.path_of(parents[r], [int(depth.argmax()), 0, n - 1, n // 2][r])[:P]
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
        assert _rel(st[slots[r]], ref_states[r][path[-1]].transpose(-1, -2)) < tol, r
        want = gdn_tree.conv_commit_state(x[r * n:(r + 1) * n], conv_pool[slots[r]], torch.tensor(path))
        assert torch.equal(cv[slots[r]], want), r
    for r, t in ((0, 1), (2, 0)):  # the tracked states, from the pre-commit slot contents
        dst, path = int(track_slots[r]), picks[r][: t + 1]
        assert _rel(st[dst], ref_states[r][path[-1]].transpose(-1, -2)) < tol, r
        want = gdn_tree.conv_commit_state(x[r * n:(r + 1) * n], conv_pool[slots[r]], torch.tensor(path))
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


def test_auto_impl_follows_the_h200_timings(kern, monkeypatch):
    import types

    h200 = types.SimpleNamespace(multi_processor_count=132, shared_memory_per_block_optin=232448)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: h200)
    assert kern.pick_impl(1, 16, 48, 128, "cuda") == ("fused", 64, None)       # a 16-node chain: one chunk
    assert kern.pick_impl(16, 16, 48, 128, "cuda") == ("fused", 64, None)
    assert kern.pick_impl(1, 65, 48, 128, "cuda") == ("twostage", 32, 16)      # 96 programs: narrow tiles
    assert kern.pick_impl(4, 65, 48, 128, "cuda") == ("twostage", 32, 16)      # 384 programs, < 4 per SM
    assert kern.pick_impl(1, 33, 48, 128, "cuda") == ("twostage", 64, 16)      # small trees: wide tiles
    assert kern.pick_impl(16, 65, 48, 128, "cuda") == ("twostage", 32, 64)     # 1040 tree tokens; + register limit
    assert kern.pick_impl(16, 33, 48, 128, "cuda") == ("twostage", 64, 64)
    assert kern.pick_impl(16, 17, 48, 128, "cuda") == ("twostage", 64, 16)
    assert kern.pick_impl(1, 17, 48, 128, "cuda") == ("twostage", 32, 16)      # 17 nodes, 96 programs < SMs
    assert kern.pick_impl(4, 17, 48, 128, "cuda") == ("twostage", 64, 16)      # 384 programs: wide again
    assert kern.pick_impl(1, 129, 48, 128, "cuda") == ("split", 64, None)      # past one 64-node chunk
    assert kern.pick_impl(16, 129, 48, 128, "cuda") == ("fused", 64, None)
    assert kern.pick_impl(1, 65, 48, 128, "cpu") == ("fused", 64, None)        # the interpreter
    # RTX PRO 6000 (sm_120, 188 SMs, ~99 KiB shared memory per block): the 64-node pair tile
    # fits with bf16 operands (53 KiB), not with fp32 ones (128 KiB).
    blackwell = types.SimpleNamespace(multi_processor_count=188, shared_memory_per_block_optin=101376)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: blackwell)
    assert kern.pick_impl(16, 65, 48, 128, "cuda") == ("twostage", 32, 64)
    assert kern.pick_impl(16, 65, 48, 128, "cuda", raw16=False) == ("twostage", 32, 16)


def test_register_limit_rule(kern, monkeypatch):
    """168 registers for the twostage kernels past 33 nodes with 32-wide tiles from 4 programs
    (of 64-wide tiles) per SM — where the H200 timed it faster (bs 16 / 64) — else none (bs 1 /
    4, 33-node trees, 64-wide tiles, other impls, the interpreter)."""
    import types

    h200 = types.SimpleNamespace(multi_processor_count=132, shared_memory_per_block_optin=232448)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: h200)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert kern.register_limit("twostage", 65, 16, 48, 128, 32, "cuda") == 168
    assert kern.register_limit("twostage", 65, 64, 48, 128, 32, "cuda") == 168
    assert kern.register_limit("twostage", 65, 4, 48, 128, 32, "cuda") == 0     # 384 programs < 528
    assert kern.register_limit("twostage", 65, 16, 48, 128, 64, "cuda") == 0    # 64-wide tiles: slower with it
    assert kern.register_limit("twostage", 33, 16, 48, 128, 32, "cuda") == 0
    assert kern.register_limit("fused", 65, 16, 48, 128, 32, "cuda") == 0
    assert kern.register_limit("twostage", 65, 16, 48, 128, 32, "cpu") == 0
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert kern.register_limit("twostage", 65, 16, 48, 128, 32, "cuda") == 0


def test_prep_forms_pairs_past_33_nodes(kern, monkeypatch):
    """The H200 timed the prep's own pair products faster than the pair kernel at 65 nodes and
    slower at 17 and 33 (session 10); only "twostage" has a prep."""
    assert kern.prep_forms_pairs("twostage", 65) and kern.prep_forms_pairs("twostage", 34)
    assert not kern.prep_forms_pairs("twostage", 33) and not kern.prep_forms_pairs("twostage", 17)
    assert not kern.prep_forms_pairs("fused", 65) and not kern.prep_forms_pairs("split", 129)
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
    """SGLANG_DDTREE_WY_SOLVE_PRECISION / _STATE_PARTS reach the verify's keywords; unset leaves
    the kernel's defaults; a bad value is an error naming the variable (the engine reads them at
    its first verify) and the kernel refuses bad keywords itself."""
    from sglang_ddtree.compat import gdn_wy
    from sglang_ddtree.kernels import gdn_tree_triton as kern

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
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(1, 4, 1, 1, 16, 16, torch.float32, slots=1)
    anc = _explicit([-1, 0, 1, 2], 4)[1][None]
    args = (q, k, v, a, b, A_log, dt_bias, anc, state, torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="solve_precision must be one of"):
        kern.tree_gdn_verify(*args, solve_precision="tf32")
    with pytest.raises(ValueError, match="state_parts must be 2 or 3"):
        kern.tree_gdn_verify(*args, state_parts=4)
    with pytest.raises(ValueError, match="max_registers must be 0"):
        kern.tree_gdn_verify(*args, impl="twostage", max_registers=300)


@pytest.mark.parametrize("impl,n", [("twostage+pairs", 40), ("twostage+pairs", 65), ("fused", 40)])
@pytest.mark.parametrize("solve,parts", [("bf16x3", 3), ("tf32x3", 2), ("bf16x3", 2)])
@kernels_here
def test_fast_solve_and_two_part_state(kern, impl, n, solve, parts):
    """``solve_precision="bf16x3"`` (fp32-by-fp32 products from two bf16 parts per operand) and
    ``state_parts=2`` (the state in two bf16 parts): both trade the fp32 accuracy of the default
    for fewer tensor-core passes. The committed fp32 states within 1e-4 of the float64 path
    reference (~2^-16 per product; measured: 1e-6 .. 2e-5 in the interpreter, 4e-7 .. 4e-6 on
    the H200, vs ~1.5e-7 fp32-accurate), the bf16 output within bf16 rounding. Both are the
    defaults under "bf16x3" (``None``): the same output bits as asking for them."""
    _verify_and_commit_case(kern, torch.bfloat16, 1e-2, n, "bf16x3", impl, state_tol=1e-4,
                            solve_precision=solve, state_parts=parts)
    if (solve, parts) == ("bf16x3", 2):
        q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(2, n, 2, 4, 32, 32, torch.bfloat16)
        anc = torch.stack([t[1] for t in _trees(n)[:2]])
        args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc, state)] + [torch.tensor([1, 3], device=DEV)]
        o_def, u_def, _ = kern.tree_gdn_verify(*args, precision="bf16x3", **_impl(impl))
        o_set, u_set, _ = kern.tree_gdn_verify(*args, precision="bf16x3", **_impl(impl), solve_precision="bf16x3",
                                               state_parts=2)
        o_acc, u_acc, _ = kern.tree_gdn_verify(*args, precision="bf16x3", **_impl(impl), solve_precision="tf32x3",
                                               state_parts=3)
        assert torch.equal(u_def, u_set) and torch.equal(o_def, o_set)
        assert not torch.equal(u_def, u_acc)  # the knobs are really used


@pytest.mark.skipif(not HAS_CUDA, reason="a register limit is a GPU compile option")
@kernels_here
def test_register_limit_changes_no_result(kern):
    """``max_registers`` (Triton's maxnreg on the twostage kernels) only moves values between
    registers and local memory: the same outputs as without it, at the 27B's head shapes."""
    trees = _trees(65)[2:]  # the builder's trees (paths within the depth bound)
    q, k, v, a, b, A_log, dt_bias, state = _gdn_inputs(2, 65, 16, 48, 128, 128, torch.bfloat16, slots=3)
    anc = torch.stack([t[1] for t in trees])
    args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc, state)] + [torch.tensor([2, 0], device=DEV)]
    free = kern.tree_gdn_verify(*args, impl="twostage")
    tight = kern.tree_gdn_verify(*args, impl="twostage", max_registers=168)
    for x, y in zip(free, tight):
        assert not torch.isnan(y).any()
        torch.testing.assert_close(y.float(), x.float(), rtol=1e-6, atol=1e-6)
