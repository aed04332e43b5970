"""Tree GatedDeltaNet verify (``kernels/gdn_tree/verify.py``) against the float64 path-by-path
references, every implementation and option; the commit of the verify's ``u`` / ``G`` checks
what the verify hands on. On CPU the kernels run in the Triton interpreter (see ``gdn_cases``).
"""

from __future__ import annotations

import pytest
import torch

from gdn_cases import (
    DEV, HAS_CUDA, explicit, from_builder, gdn_inputs, interpreter_test, kernels_here, reference, rel, trees,
)
from sglang_ddtree.kernels.gdn_tree import VerifyOptions, naive, tree_gdn_commit, tree_gdn_verify
from sglang_ddtree.kernels.gdn_tree.verify import _squarings, gate_rows

test_in_triton_interpreter = interpreter_test(__file__)

# "ieee": exact fp32 products; "tf32x3": tensor-core products split in three tf32 parts (~fp32
# accuracy, faster on Hopper). The interpreter computes in numpy either way, so the second is
# only run compiled on a GPU.
PRECISIONS = ["ieee", "tf32x3"] if HAS_CUDA else ["ieee"]
# "+pdl": the apply pass launched as a programmatic dependent of the prep (a GPU launch mode).
IMPLS = ["fused", "fused+pairs", "split", "twostage", "twostage+pairs"] + (
    ["twostage+pdl", "twostage+pairs+pdl"] if HAS_CUDA else [])


def _impl(impl):
    """``VerifyOptions`` fields of a test impl name: "twostage+pairs" forms the pair products
    inside the twostage prep kernel, plain "twostage" in the pair kernel (both forced: the
    default picks by tree size); "fused+pairs" inside the fused walk where the tree is one node
    chunk (16 nodes at most; larger trees take the pair kernel); "+pdl" launches the apply pass as a programmatic dependent
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
    return [(i, n) for i in IMPLS for n in sizes
            if i in ("fused", "split") or n == mid or i == "fused+pairs" and n <= 16]


@pytest.mark.parametrize("impl,n", _impl_cases([16, 23, 40]))
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dtype,tol", DTYPES)
@kernels_here
def test_tree_gdn_verify_and_commit_match_path_reference(dtype, tol, n, precision, impl):
    _verify_and_commit_case(dtype, tol, n, precision, impl)


def _verify_and_commit_case(dtype, tol, n, precision, impl, K=32, V=32, gate_shift=0.0, state_tol=None,
                            strided_gates=False, **options):
    """Verify a batch of different trees and commit a different path per request, against the
    float64 path references. ``gate_shift`` is added to the raw gate input ``a``; the committed
    states are held to ``state_tol`` (default ``tol``); ``strided_gates``: ``a`` and ``b`` reach the
    kernels as column views of one ``[T, 2 * HV + 3]`` tensor (sglang's b | a projection, padded
    so the row stride is no multiple of HV); ``options``: more ``VerifyOptions``."""
    H, HV = 2, 4
    batch = trees(n)
    bs = len(batch)  # a batch of different trees
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(bs, n, H, HV, K, V, dtype)
    a = a + gate_shift
    anc = torch.stack([t[1] for t in batch])
    parents = [t[0] for t in batch]
    slots = torch.tensor([3, 0, 4, 1])
    scale = K ** -0.5
    ref_o, ref_states = reference(q, k, v, a, b, A_log, dt_bias, parents, state[slots], scale)

    dev_args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    if strided_gates:
        ba = torch.full((a.shape[0], 2 * HV + 3), float("nan"), dtype=a.dtype, device=DEV)
        ba[:, 1: HV + 1], ba[:, HV + 2: 2 * HV + 2] = dev_args[4], dev_args[3]
        dev_args[3], dev_args[4] = ba[:, HV + 2: 2 * HV + 2], ba[:, 1: HV + 1]
        assert not dev_args[3].is_contiguous() and dev_args[3].stride(0) == 2 * HV + 3
    st = state.clone().to(DEV)
    o, u, G = tree_gdn_verify(*dev_args, st, slots.to(DEV), scale=scale,
                              options=VerifyOptions(precision=precision, **_impl(impl), **options))
    assert o.dtype == dtype and o.shape == v.shape
    print(f"[tree_gdn] n={n} {dtype} {precision} {impl} {options}: o rel err {rel(o, ref_o):.2e}")
    assert rel(o, ref_o) < tol
    assert torch.equal(st.cpu(), state)  # verify never writes the state pool

    # Commit a different accepted path per request: the deepest node, a leaf, the root, a mid node.
    picks = []
    for r, par in enumerate(parents):
        depth = torch.tensor([len(naive.path_of(par, i)) for i in range(n)])
        picks.append([int(depth.argmax()), n - 1, 0, n // 2][r])
    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    for r, node in enumerate(picks):
        path = naive.path_of(parents[r], node)[:P]
        node = path[-1]
        picks[r] = node
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
    tree_gdn_commit(st, slots.to(DEV), u, G, dev_args[1], accepted.to(DEV), accept_len.to(DEV))
    st = st.cpu()
    for r, node in enumerate(picks):
        want = ref_states[r][node].transpose(-1, -2)  # pool layout [HV, V, K]
        print(f"[tree_gdn]   committed state {r} rel err {rel(st[slots[r]], want):.2e}")
        assert rel(st[slots[r]], want) < (tol if state_tol is None else state_tol), (r, node, rel(st[slots[r]], want))
    untouched = [i for i in range(state.shape[0]) if i not in slots.tolist()]
    assert torch.equal(st[untouched], state[untouched])


@pytest.mark.parametrize("n", [7, 16])
@kernels_here
def test_fused_walk_forms_a_one_chunk_trees_pair_products(n):
    """impl "fused" with ``pairs_in_prep`` on trees of one node chunk (a chain, a star, builder
    trees, one padded): the walk's own pair products give what the pair kernel's give (the same
    products of the same rows: equal in the interpreter, within fp32 rounding compiled), at the
    served precision and in IEEE fp32; fresh random inputs."""
    H, HV, K, V = 2, 4, 32, 32
    batch = trees(n)
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(len(batch), n, H, HV, K, V, torch.bfloat16)
    anc = torch.stack([t[1] for t in batch])
    slots = torch.tensor([3, 0, 4, 1])
    args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    for precision in ("bf16x3", "ieee"):
        got = {pairs: tree_gdn_verify(*args, state.to(DEV), slots.to(DEV), options=VerifyOptions(
            impl="fused", precision=precision, pairs_in_prep=pairs)) for pairs in (False, True)}
        for x, y in zip(got[True], got[False]):  # o, u, G
            assert not torch.isnan(x).any()
            if HAS_CUDA:
                assert rel(x, y.double().cpu()) < 1e-6
            else:
                assert torch.equal(x, y)


@pytest.mark.parametrize("impl", ["fused", "split", "twostage", "twostage+pairs"])
@kernels_here
def test_gates_read_in_place_through_their_row_stride(impl):
    """a and b as column views of one wider tensor (NaN around them): the same results as
    contiguous gates, and the views reach the kernels uncopied."""
    _verify_and_commit_case(torch.bfloat16, 1e-2, 23, "ieee", impl, strided_gates=True)


def test_gate_rows_keeps_views_of_one_row_stride():
    ba = torch.randn(5, 8)
    b, a = ba[:, :4], ba[:, 4:]
    a2, b2, s = gate_rows(a, b)
    assert (a2.data_ptr(), b2.data_ptr(), s) == (a.data_ptr(), b.data_ptr(), 8)
    a3, b3, s3 = gate_rows(a, b.contiguous())  # row strides differ: both copied
    assert a3.is_contiguous() and b3.is_contiguous() and s3 == 4 and torch.equal(a3, a)
    a4, b4, s4 = gate_rows(ba[:, ::2], ba[:, 1::2])  # columns strided: copied
    assert a4.is_contiguous() and s4 == 4 and torch.equal(b4, ba[:, 1::2])


@pytest.mark.parametrize("impl,n", _impl_cases([16, 40]) if HAS_CUDA else [("fused", 40), ("twostage", 40), ("twostage+pairs", 40)])
@kernels_here
def test_bf16x3_products_are_fp32_accurate(impl, n):
    """precision "bf16x3" with bf16 q/k and its fp32-accurate options (the solve in tf32x3, the
    state in three bf16 parts): the pair products of the raw rows in one bf16 pass and the
    state products over the split state must keep fp32 accuracy: the committed states (fp32,
    built from u and G) within 5e-6 of the float64 path reference (interpreter: ~1.5e-7, as
    "ieee"; with one bf16 part instead of three, 2e-5 .. 2e-4). The bf16 output within bf16
    rounding. (In the interpreter the same algebra runs on the exact fp32 values of the parts.)"""
    _verify_and_commit_case(torch.bfloat16, 1e-2, n, "bf16x3", impl, state_tol=5e-6,
                            solve_precision="tf32x3", state_parts=3)


@pytest.mark.parametrize("impl", ["fused", "twostage"])
@kernels_here
def test_depth_bound_cuts_squarings_and_is_used(impl):
    """``max_depth`` (the tree builder's depth limit) shortens each chunk's solve: right for
    trees within the bound, and really used — a chain deeper than a wrong bound comes out wrong.
    Strong coupling (one key for every node, beta ~ 1, no decay) makes a cut series far off; it
    is also the hard case for the solve by repeated squaring, whose terms count the paths
    through a chunk: with DDTree's paths (at most 16 nodes) it stays accurate (measured
    ~1e-4 relative in fp32; a 40-node chain in one 64-node chunk is not: ~3e3)."""
    H, HV, K, V, n = 1, 2, 16, 16, 65
    within = [explicit(list(range(-1, 15)), n)] + [
        from_builder(n - 1, n, 4, seed=int(torch.randint(0, 10**6, ()))) for _ in range(2)]
    for batch, bound, ok in ((within, 15, True), (within[:1], 4, False)):
        bs = len(batch)
        q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(bs, n, H, HV, K, V, torch.float32, slots=bs)
        k, a, b = k[:1].expand_as(k).contiguous(), a - 30.0, b + 6.0
        anc = torch.stack([t[1] for t in batch])
        slots = torch.arange(bs)
        ref_o, _ = reference(q, k, v, a, b, A_log, dt_bias, [t[0] for t in batch], state[slots], K ** -0.5)
        o, *_ = tree_gdn_verify(*[x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)], state.to(DEV),
                                slots.to(DEV), max_depth=bound, options=VerifyOptions(precision="ieee", impl=impl))
        assert (rel(o, ref_o) < 1e-3) == ok, (bound, rel(o, ref_o))


@pytest.mark.skipif(not HAS_CUDA, reason="programmatic dependent launch is a GPU launch mode")
@pytest.mark.parametrize("n,pairs", [(17, False), (33, True), (65, True), (65, False)])
def test_pdl_apply_equals_the_plain_launch_under_graph_replay(n, pairs):
    """``pdl=True`` only moves the apply pass's state products before its wait for the prep: the
    same arithmetic, so the outputs, u and G equal the plain launch's bit for bit — replayed from
    a CUDA graph, as the engine runs the verify, with fresh inputs copied in before the replay."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("PDL needs compute capability 9.0+")
    H, HV, K, V = 2, 6, 128, 128
    batch = [from_builder(n - 1, n, 4, seed=int(torch.randint(0, 10**6, ()))) for _ in range(3)]
    anc = torch.stack([t[1] for t in batch]).cuda()
    args = [x.cuda() for x in gdn_inputs(len(batch), n, H, HV, K, V, torch.bfloat16)]
    slots = torch.tensor([2, 0, 1], device="cuda")
    plain = VerifyOptions(impl="twostage", pairs_in_prep=pairs, pdl=False)
    want = tree_gdn_verify(*args[:7], anc, args[7], slots, max_depth=15, options=plain)
    fresh = [x.clone().uniform_(-1, 1) if x.dtype == torch.bfloat16 else x.clone() for x in args[:7]]
    static = [x.clone() for x in args[:7]]
    u_out, G_out = torch.empty_like(want[1]), torch.empty_like(want[2])
    run = lambda: tree_gdn_verify(*static, anc, args[7], slots, max_depth=15, u_out=u_out, G_out=G_out,  # noqa: E731
                                  options=VerifyOptions(impl="twostage", pairs_in_prep=pairs, pdl=True))
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
    ref = tree_gdn_verify(*fresh, anc, args[7], slots, max_depth=15, options=plain)
    assert torch.equal(o_graph, ref[0]) and torch.equal(u_out, ref[1]) and torch.equal(G_out, ref[2])


@kernels_here
def test_pdl_needs_a_gpu_that_has_it(monkeypatch):
    """pdl=True where programmatic dependent launch cannot run is an error naming the switch, not
    a quiet plain launch."""
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(1, 17, 1, 2, 16, 16, torch.float32, slots=1)
    anc = explicit(list(range(-1, 16)), 17)[1][None]
    args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)] + [state.to(DEV), torch.zeros(1, dtype=torch.int64, device=DEV)]
    if HAS_CUDA:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (8, 0))
    with pytest.raises(ValueError, match=r"VerifyOptions\(pdl=True\)"):
        tree_gdn_verify(*args, options=VerifyOptions(impl="twostage", pdl=True))


@pytest.mark.parametrize("impl", ["twostage", "twostage+pairs"])
@kernels_here
def test_twostage_on_65_node_trees(impl):
    """Full 64-node chunks (the default path of budget 64: the batch's trees include a 64-node
    chain and bushy trees), fp32 against the float64 path references."""
    _verify_and_commit_case(torch.float32, 2e-5, 65, "ieee", impl)


@pytest.mark.parametrize("impl", ["fused", "split", "twostage"])
@kernels_here
def test_padded_rows_never_read_before_the_pool(impl):
    """A CUDA-graph replay pads the batch with rows whose slot is sglang's PAD_SLOT_ID (-1). The
    verify must not read the memory before the pool for them (on the H200 an illegal address at
    64 requests): that memory is NaN here, so a padded row that read it would come out NaN. Real
    rows are unchanged by the padded one. (The tree conv's case: ``test_conv.py``.)"""
    H, HV, K, V, n = 1, 2, 16, 16, 17
    anc = torch.stack([t[1] for t in trees(n)[:2]]).to(DEV)
    q, k, v, a, b, A_log, dt_bias, state = (x.to(DEV) for x in gdn_inputs(2, n, H, HV, K, V, torch.float32, slots=3))
    big = torch.full((4, HV, V, K), float("nan"), device=DEV)
    big[1:] = state  # slot -1 of the pool view is NaN
    padded = torch.tensor([2, -1], device=DEV)
    opts = VerifyOptions(impl=impl, precision="ieee")
    got = tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, big[1:], padded, options=opts)
    want = tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, torch.tensor([2, 0], device=DEV), options=opts)
    for g, w in zip(got, want):
        assert not torch.isnan(g).any()
        assert torch.equal(g[: g.shape[0] // 2], w[: w.shape[0] // 2])


@kernels_here
def test_twostage_refuses_trees_past_one_chunk():
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(1, 70, 1, 2, 16, 16, torch.float32, slots=1)
    anc = explicit(list(range(-1, 69)), 70)[1][None]
    with pytest.raises(ValueError, match="at most 65 nodes"):
        tree_gdn_verify(*[x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)], state.to(DEV),
                        torch.zeros(1, dtype=torch.int64).to(DEV), options=VerifyOptions(impl="twostage"))


def test_squarings_cover_the_longest_path():
    # (I + A)^-1 = (I - A)(I + A^2)...(I + A^(2^m)) needs 2^(m+1) >= L for paths of L nodes.
    for block, path, want in [(16, None, 3), (64, None, 5), (64, 15, 3), (64, 16, 3), (64, 17, 4),
                              (32, None, 4), (16, 2, 0), (16, 3, 1), (16, 1, 0)]:
        assert _squarings(block, path) == want, (block, path)


@kernels_here
def test_tree_gdn_deep_chain_and_wide_tree_fp32():
    # A 16-deep chain (max DDTree depth) batched with a 64-node best-first tree (several node blocks).
    H, HV, K, V = 1, 2, 16, 16
    n = 64
    batch = [explicit(list(range(-1, 15)), n), from_builder(n - 1, n, 8, seed=7)]
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(2, n, H, HV, K, V, torch.float32, slots=2)
    anc = torch.stack([t[1] for t in batch])
    ref_o, _ = reference(q, k, v, a, b, A_log, dt_bias, [t[0] for t in batch], state[[1, 0]], K ** -0.5)
    o, *_ = tree_gdn_verify(*[x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)],
                            state.to(DEV), torch.tensor([1, 0]).to(DEV))
    assert rel(o, ref_o) < 2e-4


@kernels_here
def test_tree_gdn_rejects_bad_shapes():
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(1, 8, 2, 4, 16, 16, torch.float32)
    anc = torch.eye(9, dtype=torch.bool).unsqueeze(0)  # 9 nodes but 8 tokens
    with pytest.raises(ValueError, match="tokens"):
        tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, torch.tensor([0]))


def test_options_refuse_bad_values():
    """The verify refuses options outside their values itself (the engine's knobs check theirs
    by name; those tests live with the engine)."""
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(1, 4, 1, 1, 16, 16, torch.float32, slots=1)
    anc = explicit([-1, 0, 1, 2], 4)[1][None]
    args = (q, k, v, a, b, A_log, dt_bias, anc, state, torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="solve_precision must be one of"):
        tree_gdn_verify(*args, options=VerifyOptions(solve_precision="tf32"))
    with pytest.raises(ValueError, match="state_parts must be 2 or 3"):
        tree_gdn_verify(*args, options=VerifyOptions(state_parts=4))
    with pytest.raises(ValueError, match="max_registers must be 0"):
        tree_gdn_verify(*args, options=VerifyOptions(impl="twostage", max_registers=300))


@pytest.mark.parametrize("impl", IMPLS)
@kernels_here
def test_strong_decay_on_bushy_trees_stays_finite(impl):
    """Gates as a real model produces them: g ~ -20 per token. Between nodes of *different*
    branches exp(G_t - G_s) overflows fp32 (a GPU failure of the wy mode once: NaN logits);
    only ancestor pairs may contribute, and there G_t - G_s <= 0. Verify and commit must match
    the float64 path reference. (The torch WY reference's case: ``test_naive.py``.)"""
    _verify_and_commit_case(torch.float32, 2e-5, 40, "ieee", impl, K=16, V=16, gate_shift=20.0)


BLOCK_SHAPES = [(32, 32, 4), (16, 16, 4), (32, 64, 4), (16, 64, 8)]


# In the interpreter (the CI time budget) every impl at the middle tile shape and fused at all:
# the tile sizes change only the compiled program's blocking, which a GPU run covers per impl.
@pytest.mark.parametrize("impl,shape", _impl_cases(BLOCK_SHAPES) if HAS_CUDA else
                         [("fused", s) for s in BLOCK_SHAPES]
                         + [(i, BLOCK_SHAPES[len(BLOCK_SHAPES) // 2]) for i in IMPLS if i != "fused"])
@kernels_here
def test_tree_gdn_verify_block_shapes(impl, shape):
    """The tile sizes the benchmark sweeps give the same answer (fp32 inputs, ieee)."""
    block_t, block_v, num_warps = shape
    n, H, HV, K, V = 40, 2, 4, 32, 64
    batch = trees(n)
    bs = len(batch)
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(bs, n, H, HV, K, V, torch.float32)
    anc = torch.stack([t[1] for t in batch])
    slots = torch.tensor([3, 0, 4, 1])
    scale = K ** -0.5
    ref_o, _ = reference(q, k, v, a, b, A_log, dt_bias, [t[0] for t in batch], state[slots], scale)
    dev_args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc)]
    o, _, _ = tree_gdn_verify(*dev_args, state.clone().to(DEV), slots.to(DEV), scale=scale,
                              options=VerifyOptions(precision="ieee", block_t=block_t, block_v=block_v,
                                                    num_warps=num_warps, **_impl(impl)))
    assert rel(o, ref_o) < 2e-5


# 65-node trees on a GPU only: in the interpreter they took ~25 s each (65 nodes are covered
# there by test_twostage_on_65_node_trees).
# The fused kernel's fast solve on a GPU only: ~20 s in the interpreter, where the twostage
# kernel's covers the same solve and state-part code.
@pytest.mark.parametrize("impl,n", [("twostage+pairs", 40)]
                         + ([("fused", 40), ("twostage+pairs", 65)] if HAS_CUDA else []))
@pytest.mark.parametrize("solve,parts", [("bf16x3", 3), ("tf32x3", 2), ("bf16x3", 2)])
@kernels_here
def test_fast_solve_and_two_part_state(impl, n, solve, parts):
    """``solve_precision="bf16x3"`` (fp32-by-fp32 products from two bf16 parts per operand) and
    ``state_parts=2`` (the state in two bf16 parts): both trade the fp32 accuracy of the default
    for fewer tensor-core passes. The committed fp32 states within 1e-4 of the float64 path
    reference (~2^-16 per product; measured: 1e-6 .. 2e-5 in the interpreter, 4e-7 .. 4e-6 on
    the H200, vs ~1.5e-7 fp32-accurate), the bf16 output within bf16 rounding. Both are the
    defaults under "bf16x3" (``None``): the same output bits as asking for them."""
    _verify_and_commit_case(torch.bfloat16, 1e-2, n, "bf16x3", impl, state_tol=1e-4,
                            solve_precision=solve, state_parts=parts)
    if (solve, parts) == ("bf16x3", 2):
        q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(2, n, 2, 4, 32, 32, torch.bfloat16)
        anc = torch.stack([t[1] for t in trees(n)[:2]])
        args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc, state)] + [torch.tensor([1, 3], device=DEV)]
        o_def, u_def, _ = tree_gdn_verify(*args, options=VerifyOptions(precision="bf16x3", **_impl(impl)))
        o_set, u_set, _ = tree_gdn_verify(*args, options=VerifyOptions(precision="bf16x3", **_impl(impl),
                                                                       solve_precision="bf16x3", state_parts=2))
        o_acc, u_acc, _ = tree_gdn_verify(*args, options=VerifyOptions(precision="bf16x3", **_impl(impl),
                                                                       solve_precision="tf32x3", state_parts=3))
        assert torch.equal(u_def, u_set) and torch.equal(o_def, o_set)
        assert not torch.equal(u_def, u_acc)  # the knobs are really used


@pytest.mark.skipif(not HAS_CUDA, reason="a register limit is a GPU compile option")
@kernels_here
def test_register_limit_changes_no_result():
    """``max_registers`` (Triton's maxnreg on the twostage kernels) only moves values between
    registers and local memory: the same outputs as without it, at the 27B's head shapes."""
    batch = trees(65)[2:]  # the builder's trees (paths within the depth bound)
    q, k, v, a, b, A_log, dt_bias, state = gdn_inputs(2, 65, 16, 48, 128, 128, torch.bfloat16, slots=3)
    anc = torch.stack([t[1] for t in batch])
    args = [x.to(DEV) for x in (q, k, v, a, b, A_log, dt_bias, anc, state)] + [torch.tensor([2, 0], device=DEV)]
    free = tree_gdn_verify(*args, options=VerifyOptions(impl="twostage"))
    tight = tree_gdn_verify(*args, options=VerifyOptions(impl="twostage", max_registers=168))
    for x, y in zip(free, tight):
        assert not torch.isnan(y).any()
        torch.testing.assert_close(y.float(), x.float(), rtol=1e-6, atol=1e-6)
