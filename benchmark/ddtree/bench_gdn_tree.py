"""Tree GatedDeltaNet verify at Qwen3.6-27B shapes: our snapshot-free kernels vs sglang's
per-node-snapshot kernel, side by side in one process (issue: tree-aware GDN).

Per layer: 16 QK heads, 48 V heads, head dims 128, conv 4 over 10240 channels; 48 GDN layers.
Times are the median of CUDA-event-timed repeats of ONE layer's call, times 48 (every layer
does the same work on different weights). Trees come from the DDTree builder on random
per-depth log-probs (L = 15, K = 8): realistic best-first shapes; "chain" is a 16-node chain.

    python benchmark/ddtree/bench_gdn_tree.py --out results.json
    python benchmark/ddtree/bench_gdn_tree.py --smoke          # tiny shapes, no upstream (CPU: TRITON_INTERPRET=1)

Columns: ours = tree_gdn_verify + tree_conv (+ both commits, reported apart); upstream =
causal_conv1d_update + fused_sigmoid_gating_delta_rule_update in tree mode (retrieve_parent_token)
with per-node intermediate states; extra memory per request is what each method keeps per
verify step beyond the committed state (all 48 layers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from sglang_ddtree.core.tree_builder import build_tree  # noqa: E402
from sglang_ddtree.core.verify_layout import build_verify_layout  # noqa: E402
from sglang_ddtree.kernels.gdn_tree.naive import path_of  # noqa: E402

LAYERS = 48
UPSTREAM_MAX_GIB = 40
QWEN = dict(H=16, HV=48, K=128, V=128, KW=4)


def _tree_layout(bs, budget, L=15, K=8, seed=0, chain=False):
    g = torch.Generator().manual_seed(seed)
    if chain:
        lp = torch.full((bs, L, 1), 0.0)
        ids = torch.randint(0, 1000, (bs, L, 1), generator=g)
        budget = L
    else:
        lp = torch.randn(bs, L, K, generator=g).sort(-1, descending=True).values.log_softmax(-1)
        ids = torch.randint(0, 1000, (bs, L, K), generator=g)
    tree = build_tree(lp, ids, budget, None, L)
    return build_verify_layout(tree, torch.zeros(bs, dtype=torch.long), torch.full((bs,), 100), L)


def _time(fn, iters, warmup=3, graph=True, reps=8):
    """Median ms of one ``fn()`` call. On a GPU with ``graph``: ``reps`` calls captured in one
    CUDA graph and replayed (kernel time, as a CUDA-graph-served verify sees it); otherwise
    eager calls timed with CUDA events (includes Python launch overhead)."""
    dev = torch.cuda.is_available()
    for _ in range(warmup):
        fn()
    if dev and graph:
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()  # allocator warm-up on the capture stream
            with torch.cuda.graph(g, stream=s):
                for _ in range(reps):
                    fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        run, per = g.replay, reps
    else:
        run, per = fn, 1
    ts = []
    for _ in range(iters):
        if dev:
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            st.record()
            run()
            en.record()
            torch.cuda.synchronize()
            ts.append(st.elapsed_time(en) / per)
        else:
            t = time.perf_counter()
            run()
            ts.append((time.perf_counter() - t) * 1e3 / per)
    return statistics.median(ts)


def _profile(fn, reps=5):
    """Per-kernel CUDA time of one ``fn()`` call, ms (torch.profiler, mean over ``reps`` calls)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0.0)
        if t:
            out[ev.key] = round(t / 1000.0 / reps, 5)
    return out


def _deep_paths(lay, nodes: int, P: int):
    """Per tree of the layout, the first ``nodes`` nodes (root first) of the path to its deepest
    node, as the commit's ``accepted [bs, P]`` (-1 padded) and ``accept_len [bs]`` (length - 1)."""
    bs = lay.parent.shape[0]
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    for r in range(bs):
        path = path_of(lay.parent[r], int(lay.depth[r].argmax()))[:min(nodes, P)]
        accepted[r, :len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
    return accepted, accept_len


def _flag_options(flags) -> dict:
    """``VerifyOptions`` fields of a variant's flags (``--variants``); a field no flag names is
    left to the kernel."""
    return dict(pairs_in_prep=True if "pairs" in flags else False if "nopairs" in flags else None,
                pdl=True if "pdl" in flags else False if "nopdl" in flags else None,
                solve_precision="bf16x3" if "solvebf16" in flags else "tf32x3" if "solvetf32" in flags else None,
                state_parts=2 if "parts2" in flags else 3 if "parts3" in flags else None,
                max_registers=next((int(f[4:]) for f in flags if f.startswith("nreg")), None))


def parse_variant(var: str, precision: str):
    """``--variants``' ``impl:block_t:block_v[:warps[:depth[:qk_block[:prep_warps[:precision[:flags]]]]]]``
    -> ``(impl, block_t, block_v, warps, depth, qk_block, prep_warps, precision, flags)``: the
    tiles as strings, the optional ints None where empty, ``precision`` where none is named,
    ``flags`` a tuple of the ``+``-joined names."""
    impl, bt, bv, *more = var.split(":")
    opt = [int(m) if m else None for m in (more + [""] * 4)[:4]]
    prec = more[4] if len(more) > 4 and more[4] else precision
    flags = tuple(more[5].split("+")) if len(more) > 5 and more[5] else ()
    return (impl, bt, bv, *opt, prec, flags)


def run_case(bs, budget, shp, dev, iters, upstream, chain=False, precision="tf32x3", ours_on=True, alt_precisions=(),
             alt_impls=(), variants=(), commit_layers=LAYERS, profile_impls=(), extras=True,
             upstream_conv_max_nodes=None):
    """One table cell. ``extras=False`` (--defaults-only): ours only as the engine runs it (the
    verify with and without the conv, the conv, the state + conv commit, Triton and CUDA) and
    upstream replayed from a graph, none of the A/B timings beside them. Upstream's GDN kernel is
    also timed alone (beside ours_gdn_only); above ``upstream_conv_max_nodes`` nodes only that."""
    from sglang_ddtree.kernels import gdn_tree as kern

    H, HV, K, V, KW = shp["H"], shp["HV"], shp["K"], shp["V"], shp["KW"]
    C = 2 * H * K + HV * V
    lay = _tree_layout(bs, budget, chain=chain)
    N = lay.parent.shape[1]
    T = bs * N
    bf = torch.bfloat16
    q = torch.randn(T, H, K, device=dev, dtype=bf)
    k = torch.randn(T, H, K, device=dev, dtype=bf)
    v = torch.randn(T, HV, V, device=dev, dtype=bf)
    a = torch.randn(T, HV, device=dev, dtype=bf)
    b = torch.randn(T, HV, device=dev, dtype=bf)
    A_log = torch.randn(HV, device=dev) * 0.5
    dt_bias = torch.randn(HV, device=dev) * 0.5
    slots = bs + 1
    state = torch.randn(slots, HV, V, K, device=dev) * 0.1
    sidx = torch.arange(bs, device=dev, dtype=torch.int32)
    anc = lay.ancestor_mask.to(torch.uint8).to(dev)  # as the engine keeps it (engine/tree_gdn.py)
    parent = lay.parent.to(dev)
    x = torch.randn(T, C, device=dev, dtype=bf)
    w = torch.randn(C, KW, device=dev, dtype=bf)
    conv_pool = torch.randn(slots, KW - 1, C, device=dev, dtype=bf).transpose(1, 2)
    accepted = torch.full((bs, 16), -1, dtype=torch.int64)
    accepted[:, 0] = 0
    accept_len = torch.zeros(bs, dtype=torch.int64)
    accepted, accept_len = accepted.to(dev), accept_len.to(dev)

    out = {"bs": bs, "budget": "chain16" if chain else budget, "nodes": N}
    held = {}

    def ours(prec=precision, impl="auto", block_t=16, block_v=None, conv=True, num_warps=None, max_depth=15,
             qk_block=None, prep_warps=None, flags=()):  # the engine's: auto, depth bound 15
        options = kern.VerifyOptions(impl=impl, precision=prec, block_t=block_t, block_v=block_v,
                                     num_warps=num_warps, qk_block=qk_block, prep_warps=prep_warps,
                                     **_flag_options(flags))
        held["r"] = kern.tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, anc, state, sidx, max_depth=max_depth,
                                         options=options)
        if conv:
            kern.tree_conv(x, w, None, conv_pool, sidx, parent)

    if ours_on:
        out["ours_ms_48"] = _time(ours, iters) * LAYERS
        if extras:
            out["ours_eager_ms_48"] = _time(ours, iters, graph=False) * LAYERS
        for alt in alt_precisions:
            out[f"ours_{alt}_ms_48"] = _time(lambda: ours(alt), iters) * LAYERS
        for impl in alt_impls:
            out[f"ours_{impl}_ms_48"] = _time(lambda: ours(precision, impl), iters) * LAYERS
        # Where the time goes: the conv alone; the GDN verify alone per impl / tile shape
        # ("impl:block_t:block_v"), to pick the defaults.
        out["ours_conv_only_ms_48"] = _time(lambda: kern.tree_conv(x, w, None, conv_pool, sidx, parent), iters) * LAYERS
        out["ours_gdn_only_ms_48"] = _time(lambda: ours(conv=False), iters) * LAYERS  # issue 6's goals
        # The fp32-accurate products beside the default's.
        if extras:
            out["ours_gdn_only_fp32acc_ms_48"] = _time(lambda: ours(conv=False, flags=("solvetf32", "parts3")),
                                                       iters) * LAYERS
        for name, flat in (("flat", True), ("tiles", False)) if extras else ():  # both tilings beside the default's pick
            out[f"ours_conv_{name}_ms_48"] = _time(lambda: kern.tree_conv(x, w, None, conv_pool, sidx, parent, flat=flat),
                                                   iters) * LAYERS
        for var in variants:
            impl, bt, bv, nw, depth, qkb, pw, prec, flags = parse_variant(var, precision)
            key = (f"gdn_{impl}_bt{bt}_bv{bv}" + (f"_w{nw}" if nw else "") + (f"_d{depth}" if depth else "")
                   + (f"_qk{qkb}" if qkb else "") + (f"_pw{pw}" if pw else "")
                   + (f"_{prec}" if prec != precision else "") + "".join(f"_{f}" for f in flags))
            out[key + "_ms_48"] = _time(
                lambda: ours(prec, impl, int(bt), int(bv), conv=False, num_warps=nw, max_depth=depth,
                             qk_block=qkb, prep_warps=pw, flags=flags), iters) * LAYERS
        for impl in profile_impls:  # where one layer's time goes, per kernel, scaled to 48 layers
            name_, *flags = impl.split("+")  # e.g. "twostage+nopairs" (flags as in --variants)
            out[f"profile_{impl}_ms_48"] = {
                name: round(ms * LAYERS, 4)
                for name, ms in _profile(lambda: ours(precision, name_, conv=False, flags=tuple(flags))).items()}
    if ours_on:
        _, u, G = held["r"]
        st = state.clone()
        cp = conv_pool.clone()
        # What --speculative-ddtree-gdn-mode wy runs: every layer's state and conv commit in two
        # launches over buffers stacked over the layers (timed here as one launch each over 48
        # copies of this layer's inputs; eager: the host launch cost is part of it).
        # (``commit_layers`` copies, scaled to 48 layers: the CPU smoke run uses 1.)
        nl, scale = commit_layers, LAYERS / commit_layers
        st48 = st.unsqueeze(0).expand(nl, *st.shape).contiguous()
        cp48 = cp.unsqueeze(0).expand(nl, *cp.shape).transpose(2, 3).contiguous().transpose(2, 3)
        u48, G48 = u.unsqueeze(0).expand(nl, *u.shape).contiguous(), G.unsqueeze(0).expand(nl, *G.shape).contiguous()
        x48 = x.unsqueeze(0).expand(nl, *x.shape).contiguous()
        w_tab, _ = kern.conv_weight_tables([w] * nl, [None] * nl, bf, dev)

        def commit(lo, hi, acc=accepted, alen=accept_len, state_commit=kern.tree_gdn_commit_from_x_layers):
            # keys recomputed from x, as the engine commits (SGLANG_DDTREE_WY_COMMIT=cuda: sgl-kernel's port)
            state_commit(st48[lo:hi], sidx, u48[lo:hi], G48[lo:hi], x48[lo:hi], w_tab[lo:hi],
                         None, KW, cp48[lo:hi], H * K, H, acc, alen)
            kern.tree_conv_commit_layers(x48[lo:hi], cp48[lo:hi], sidx, acc, alen)

        # The root alone accepted (what random weights give), then a 6-node path (root + 5, a
        # DFlash-like acceptance) where the tree is that deep: the commit's work grows with it.
        out["ours_commit_ms_48"] = _time(lambda: commit(0, nl), iters) * scale
        acc6, len6 = _deep_paths(lay, 6, accepted.shape[1])
        acc6, len6 = acc6.to(dev), len6.to(dev)
        if extras:
            out["ours_commit_path6_ms_48"] = _time(lambda: commit(0, nl, acc6, len6), iters) * scale
        from sglang_ddtree.kernels import tree_cuda

        why = tree_cuda.available() if torch.device(dev).type == "cuda" else "no CUDA device"
        if why is None:  # the CUDA port beside it (the engine's SGLANG_DDTREE_WY_COMMIT=cuda)
            cu = tree_cuda.gdn_tree_commit_from_x_layers
            out["ours_commit_cuda_ms_48"] = _time(lambda: commit(0, nl, state_commit=cu), iters) * scale
            if extras:
                out["ours_commit_cuda_path6_ms_48"] = _time(lambda: commit(0, nl, acc6, len6, state_commit=cu),
                                                            iters) * scale
        else:
            out["ours_commit_cuda_skipped"] = why
        if nl > 1 and extras:  # (the CPU smoke run skips the A/B: one layer, and the interpreter is slow)
            out["ours_commit_eager_ms_48"] = _time(lambda: commit(0, nl), iters, graph=False) * scale
            # The same work as per-layer launch pairs (SGLANG_DDTREE_WY_COMMIT=per-layer), eager.
            out["ours_commit_per_layer_eager_ms_48"] = _time(
                lambda: [commit(i, i + 1) for i in range(nl)], iters, graph=False) * scale
            # The state commit alone with the keys given (kept per layer instead of recomputed from
            # x: not what the engine stores), Triton in one launch and sgl-kernel's first CUDA kernel
            # per layer.
            k48 = k.unsqueeze(0).expand(nl, *k.shape).contiguous()
            out["ours_commit_keys_triton_ms_48"] = _time(
                lambda: kern.tree_gdn_commit_layers(st48, sidx, u48, G48, k48, accepted, accept_len), iters) * scale
            if why is None:
                out["ours_commit_keys_cuda_ms_48"] = _time(lambda: [tree_cuda.gdn_tree_commit(
                    st48[i], sidx, u48[i], G48[i], k, accepted, accept_len) for i in range(nl)], iters) * scale
            else:
                out["ours_commit_keys_cuda_skipped"] = why
    # Kept per request per step (48 layers): u (fp32), G (fp32) and the conv inputs x (bf16).
    out["ours_extra_mib_per_req"] = LAYERS * N * (HV * V * 4 + HV * 4 + C * 2) / 2**20
    # Upstream keeps one fp32 state and one conv window per node, per layer call.
    upstream_bytes = bs * N * (HV * V * K * 4 + C * (KW - 1) * 2)
    if upstream and upstream_bytes > UPSTREAM_MAX_GIB * 2**30:
        out["upstream_skipped"] = f"needs {upstream_bytes / 2**30:.0f} GiB of per-node snapshots for one layer"
        upstream = False
    if upstream:
        from sglang.kernels.ops.attention.fla.fused_sigmoid_gating_recurrent import (
            fused_sigmoid_gating_delta_rule_update,
        )
        from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

        inter = torch.empty(bs, N, HV, V, K, device=dev, dtype=torch.float32)
        inter_conv = torch.empty(bs, N, C, KW - 1, device=dev, dtype=bf)
        # Each node's parent (node index within its request; the root's is never read). Upstream's
        # tree conv writes these from the first-child / next-sibling links and its GDN kernel reads
        # them to load the parent's snapshot; the GDN kernel timed alone runs before any conv, so
        # they are given here from the layout (left uninitialised, as before, its reads
        # went to arbitrary snapshots: an illegal address at bs 64 on the H200).
        rpt = lay.parent.to(dev, torch.int64).contiguous()
        # The chain row runs upstream's chain mode (what DFLASH uses: no tree links, parent = previous).
        fc, ns = lay.first_child.to(dev).contiguous(), lay.next_sibling.to(dev).contiguous()
        if chain:
            fc = ns = rpt = None
        cu = torch.arange(0, T + 1, N, device=dev, dtype=torch.int32)

        def their_conv():
            xc = x.view(bs, N, C).transpose(1, 2)
            causal_conv1d_update(xc, conv_pool, w, None, "silu", conv_state_indices=sidx,
                                 intermediate_conv_window=inter_conv, intermediate_state_indices=sidx,
                                 retrieve_next_token=fc, retrieve_next_sibling=ns, retrieve_parent_token=rpt)

        def their_gdn():
            fused_sigmoid_gating_delta_rule_update(
                A_log=A_log, a=a, dt_bias=dt_bias, softplus_beta=1.0, softplus_threshold=20.0,
                q=q.unsqueeze(0), k=k.unsqueeze(0), v=v.unsqueeze(0), b=b, initial_state_source=state,
                initial_state_indices=sidx, use_qk_l2norm_in_kernel=True, cu_seqlens=cu,
                disable_state_update=True, intermediate_states_buffer=inter, intermediate_state_indices=sidx,
                cache_steps=N, retrieve_parent_token=rpt)

        def theirs():
            their_conv()
            their_gdn()

        out["upstream_gdn_only_ms_48"] = _time(their_gdn, iters) * LAYERS
        if upstream_conv_max_nodes is not None and N > upstream_conv_max_nodes:
            # The tree conv kernel unrolls its token loop over the nodes (causal_conv1d_triton.py:
            # tl.static_range(seqlen)); at 257 nodes its compile did not finish within ~400 s on
            # the H200 (results/ARCHIVE.md), so such cells compare the GDN kernels alone.
            out["upstream_conv_skipped"] = (f"{N} nodes > --upstream-conv-max-nodes {upstream_conv_max_nodes}: "
                                            "upstream's tree conv compiles unrolled over the nodes")
        else:
            out["upstream_ms_48"] = _time(theirs, iters) * LAYERS
            if rpt is not None and not torch.equal(rpt[:, 1:], lay.parent[:, 1:].to(dev)):
                raise RuntimeError("upstream's tree conv derived parents other than the layout's: the "
                                   "first-child / next-sibling links given to it are wrong")
            if extras:
                out["upstream_eager_ms_48"] = _time(theirs, iters, graph=False) * LAYERS
        out["upstream_extra_mib_per_req"] = LAYERS * N * (HV * V * K * 4 + C * (KW - 1) * 2) / 2**20
    return out


def _parse_case(spec: str):
    """``BSxB`` (``4x64``) or ``BSxchain`` as ``(bs, budget, chain)``, the tuples ``main`` runs."""
    bs, sep, bud = spec.lower().partition("x")
    try:
        if not sep or int(bs) < 1 or (bud != "chain" and int(bud) < 1):
            raise ValueError
    except ValueError:
        raise SystemExit(f"bench_gdn_tree.py: --cases takes BSxB or BSxchain (e.g. 4x64, 1xchain), got {spec!r}")
    return (int(bs), 15, True) if bud == "chain" else (int(bs), int(bud), False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bs", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--precision", default="tf32x3", choices=["ieee", "tf32", "tf32x3", "bf16x3"])
    ap.add_argument("--alt-precisions", nargs="*", default=["ieee"], help="also time ours with these")
    ap.add_argument("--alt-impls", nargs="*", default=["fused", "split", "twostage"],
                    help="also time these tree_gdn_verify impls")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="also time the GDN verify alone as "
                         "impl:block_t:block_v[:num_warps[:max_depth[:qk_block[:prep_warps[:precision[:flags]]]]]] "
                         "(e.g. split:16:64:8, twostage:64:64:4:15:16, twostage:64:32:4:15:16:8:tf32x3, "
                         "twostage:64:32:4:15::::pairs+pdl; flags: pairs / nopairs = pair products inside the "
                         "twostage prep / in a kernel of their own, neither = the kernel's default; pdl / nopdl = the "
                         "apply pass launched as a programmatic dependent of the prep / plainly, neither = the kernel's "
                         "default; solvebf16 / solvetf32 = solve_precision bf16x3 / tf32x3; parts2 / parts3 = state_parts 2 / 3, "
                         "neither = the kernel's default; nregR = max_registers R, nreg0 = none)")
    ap.add_argument("--profile-impls", nargs="*", default=[],
                    help="per-kernel CUDA time (torch.profiler) of the GDN verify alone with these impls")
    ap.add_argument("--no-upstream", action="store_true")
    ap.add_argument("--no-chain", action="store_true", help="skip the 16-node chain rows (trees only)")
    ap.add_argument("--cases", nargs="+", default=[], metavar="BSxB",
                    help="only these cases, in this order, instead of every --bs by --budgets (and chain) pair "
                         "smallest first, e.g. 4x64 1x256 16xchain: one call fills single cells of the table")
    ap.add_argument("--defaults-only", action="store_true",
                    help="per cell only ours as the engine runs it and upstream from a graph (no eager, "
                         "precision, conv-tiling or commit A/B timings): the quickest side-by-side table")
    ap.add_argument("--upstream-conv-max-nodes", type=int, default=None,
                    help="cells with more nodes time upstream's GDN kernel alone, not its tree conv (which "
                         "compiles unrolled over the nodes: minutes at 257)")
    ap.add_argument("--deadline-s", type=float, default=1e9, help="stop starting new cases after this many seconds")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, 1 iteration, no upstream (CPU: TRITON_INTERPRET=1)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    t0 = time.time()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    shp = QWEN
    if a.smoke:
        shp = dict(H=1, HV=2, K=16, V=16, KW=4)
        a.bs, a.budgets, a.iters, a.no_upstream, a.alt_precisions = [1, 2], [8], 1, True, []
        a.alt_impls = ["split", "twostage"]
        a.variants = a.variants or ["split:32:16", "fused:16:16:8", "twostage:64:16:4:3:16"]
    meta = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
            "shapes": shp, "layers": LAYERS, "precision": a.precision, "iters": a.iters,
            "timing": "CUDA-graph replay of 8 calls, median of iters (eager: CUDA events around one call)"}
    rows = []

    def save():
        if a.out:
            a.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))

    if a.cases:  # in the order given (what matters most first, ahead of a deadline)
        cases = [_parse_case(c) for c in a.cases]
    else:
        cases = ([] if a.no_chain else [(bs, 15, True) for bs in a.bs]) + [(bs, bud, False) for bs in a.bs
                                                                           for bud in a.budgets]
        cases.sort(key=lambda c: (c[0] * (c[1] + 1), c[0]))
    # Without --cases: ours for every case first (one compile covers all shapes), then upstream (its
    # conv kernel unrolls over the verify width and compiles once per width), smallest first.
    phases = ("ours",) if a.no_upstream else ("ours", "upstream")
    # With --cases, each case's cell is finished (ours, then upstream) before the next one starts:
    # a deadline leaves whole cells instead of ours alone.
    steps = ([(ph, c) for c in cases for ph in phases] if a.cases else [(ph, c) for ph in phases for c in cases])
    for phase, (bs, budget, chain) in steps:
        if time.time() - t0 > a.deadline_s:
            meta.setdefault("stopped_at_deadline", []).append([phase, bs, budget, chain])
            continue
        r = run_case(bs, budget, shp, dev, a.iters, phase == "upstream", chain=chain, precision=a.precision,
                     ours_on=phase == "ours", alt_precisions=a.alt_precisions, alt_impls=a.alt_impls,
                     variants=a.variants if phase == "ours" else (), commit_layers=1 if a.smoke else LAYERS,
                     profile_impls=a.profile_impls if phase == "ours" and dev == "cuda" else (),
                     extras=not a.defaults_only, upstream_conv_max_nodes=a.upstream_conv_max_nodes)
        if phase == "ours":
            rows.append(r)
        else:
            match = next(x for x in rows if x["bs"] == r["bs"] and x["budget"] == r["budget"])
            match.update({key: val for key, val in r.items() if key.startswith("upstream")})
            if "upstream_ms_48" in match:
                match["speedup"] = match["upstream_ms_48"] / match["ours_ms_48"]
            if "ours_gdn_only_ms_48" in match and "upstream_gdn_only_ms_48" in match:
                match["speedup_gdn_only"] = match["upstream_gdn_only_ms_48"] / match["ours_gdn_only_ms_48"]
            r = match
        print(json.dumps(r), flush=True)
        save()
    save()


if __name__ == "__main__":
    main()
