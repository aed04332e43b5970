"""CPU checks of the GPU-suite helpers: the near-tie comparison (test/e2e/gpu_cases.py) and the
placeholder modules that let EAGLE draft graphs capture on a trimmed host
(sglang_ddtree/compat/trimmed_bundle.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import gpu_cases
from sglang_ddtree.compat import trimmed_bundle


def _top2(pairs):
    return [[(a, i, None), (b, j, None)] for (a, i), (b, j) in pairs]


def test_compare_equal_and_prefix():
    top = _top2([((-0.1, 5), (-3.0, 6))] * 4)
    assert gpu_cases.compare_to_reference([5, 5, 5], [5, 5, 5], top) == {"compared": 3, "equal": True, "near_tie": None}
    assert gpu_cases.compare_to_reference([5, 5], [5, 5, 5], top)["equal"] is False  # too short


def test_compare_accepts_only_a_real_near_tie():
    top = _top2([((-0.1, 5), (-3.0, 6)), ((-0.70, 7), (-0.72, 8)), ((-0.1, 5), (-3.0, 6))])
    c = gpu_cases.compare_to_reference([5, 8, 1], [5, 7, 5], top)
    assert c["compared"] == 1 and c["near_tie"]["ok"] and c["near_tie"]["gap"] == pytest.approx(0.02)
    # Same position, but a token outside the top 2: a real mismatch.
    assert not gpu_cases.compare_to_reference([5, 9, 1], [5, 7, 5], top)["near_tie"]["ok"]
    # A clear winner (gap 2.9 > tol) chosen differently: a real mismatch.
    assert not gpu_cases.compare_to_reference([6, 7, 5], [5, 7, 5], top)["near_tie"]["ok"]


def test_compare_near_tie_with_a_token_ranked_below_second():
    # Three within 0.03 of each other (a tiny random model's flat logits): the third counts.
    top = [[(-1.00, 7, None), (-1.01, 8, None), (-1.03, 9, None), (-2.0, 3, None)]] * 2
    c = gpu_cases.compare_to_reference([9, 1], [7, 7], top)
    assert c["near_tie"]["ok"] and c["near_tie"]["listed"] and c["near_tie"]["gap"] == pytest.approx(0.03)
    # Listed but beyond the tolerance; not listed at all (gap: a lower bound from the last listed).
    assert not gpu_cases.compare_to_reference([3, 1], [7, 7], top)["near_tie"]["ok"]
    c = gpu_cases.compare_to_reference([4, 1], [7, 7], top)
    assert not c["near_tie"]["ok"] and not c["near_tie"]["listed"] and c["near_tie"]["gap"] == pytest.approx(1.0)


def test_auto_cases_need_a_graph_replay_every_step_and_both_widths():
    """The budget-auto GPU cases fail when any step ran eagerly (a width without its own graphs)
    or when the policy did not step through both widths."""
    ref = [[5] * 40] * 4
    top = [_top2([((-0.1, 5), (-3.0, 6))] * 40)] * 4
    plain = dict(name="plain-llama", model="llama", rc=0, output_ids=ref, top2=top, graphs=["target decode"])
    new = gpu_cases.MIXED_NEW

    def results(dd):
        rec = dict(name="ddtree-auto-llama", model="llama", rc=0, max_new_tokens=new, graphs=["target verify"],
                   output_ids=[r[:n] for r, n in zip(ref, new)], meta_info=[{}] * 4, ddtree=dd)
        return {"plain-llama": plain, "ddtree-auto-llama": rec}

    good = dict(steps=40, verify_cuda_graph_steps=40, budget_policy={"steps_by_choice": {"chain": 30, "32": 10}})
    assert gpu_cases.assert_speculative(results(good), "ddtree-auto-llama") is None
    for bad in (dict(good, verify_cuda_graph_steps=39),  # one step verified eagerly
                dict(good, budget_policy={"steps_by_choice": {"chain": 40}})):  # one width only
        with pytest.raises(AssertionError):
            gpu_cases.assert_speculative(results(bad), "ddtree-auto-llama")


def test_the_skinny_case_needs_the_kernel_in_the_gdn_and_mlp_products(tmp_path):
    """The skinny GEMM case reads the products the kernel took from the server's report
    (``/server_info``'s ``ddtree.skinny_gemm_routed``) and fails unless the GatedDeltaNet
    projections, the MLP's gate_up and the fused down projection are among them; its table lists
    every product at 16-128 tokens and loads as the flag reads it on the GPU it names."""
    from sglang_ddtree.kernels import gemm_table as gt
    from sglang_ddtree.testing.skinny_tables import qwen35_linear_shapes

    name = "ddtree15-qwen35-wy-skinny"
    shapes = qwen35_linear_shapes(json.loads((Path(gpu_cases._path("qwen35")) / "config.json").read_text()))
    (tmp_path / "t.json").write_text(json.dumps(gpu_cases.skinny_test_table("qwen35", "NVIDIA H100 80GB HBM3")))
    loaded = gt.load_table(tmp_path / "t.json", "NVIDIA H100 80GB HBM3")
    assert len(loaded) == 8 * (len(set(shapes.values())) + 1)  # every row kept: token counts x (shapes + fused down)
    assert {m for m, *_ in loaded} == {16 * b for b in range(1, 9)}
    routes = [[16, *shapes[s], None, gpu_cases.SKINNY_TILING] for s in ("gdn_in_proj_qkvz", "gdn_out_proj", "mlp_gate_up")]
    routes.append([16, *shapes["mlp_down"], "silu_mul", gpu_cases.SKINNY_TILING])

    ref = [[5] * 40] * 4
    top = [_top2([((-0.1, 5), (-3.0, 6))] * 40)] * 4
    plain = dict(name="plain-qwen35", model="qwen35", rc=0, output_ids=ref, top2=top, graphs=["target decode"])

    def results(routes):
        rec = dict(name=name, model="qwen35", rc=0, max_new_tokens=gpu_cases.MIXED_NEW, graphs=["target verify"],
                   output_ids=[r[:n] for r, n in zip(ref, gpu_cases.MIXED_NEW)], meta_info=[{}] * 4,
                   ddtree=dict(steps=10, verify_cuda_graph_steps=10, skinny_gemm_routed=routes))
        return {"plain-qwen35": plain, name: rec}

    assert gpu_cases.assert_speculative(results(routes), name) is None
    for drop in range(len(routes)):  # any one of them missing fails the case
        with pytest.raises(AssertionError):
            gpu_cases.assert_speculative(results(routes[:drop] + routes[drop + 1:]), name)


def test_logprob_cases_match_the_plain_runs_top1_within_tolerance():
    """A case asking for logprobs passes when its top-1 log-prob at every agreeing position is
    within LOGPROB_TOL of the plain run's, and fails when one is off or top-2 is missing."""
    name = "ddtree15-llama-oracle-first"
    assert gpu_cases.CASES[name][2].get("logprobs")
    n = gpu_cases.ORACLE_NEW
    ref = [[5] * gpu_cases.REF_NEW] * 4
    top = [_top2([((-0.1, 5), (-3.0, 6))] * gpu_cases.REF_NEW)] * 4
    plain = dict(name="plain-llama", model="llama", rc=0, output_ids=ref, top2=top, graphs=["target decode"])
    hist = gpu_cases.ORACLE_HISTOGRAM["first"]

    def results(lp0):
        got = [_top2([((lp0, 5), (-3.0, 6))] * n)] + [_top2([((-0.1, 5), (-3.0, 6))] * n)] * 3
        rec = dict(name=name, model="llama", rc=0, max_new_tokens=[n] * 4, graphs=["target verify"],
                   output_ids=[r[:n] for r in ref], meta_info=[{"spec_correct_drafts_histogram": hist}] * 4,
                   ddtree={"verify_cuda_graph_steps": 3}, top2=got)
        return {"plain-llama": plain, name: rec}

    assert gpu_cases.assert_speculative(results(-0.1 - gpu_cases.LOGPROB_TOL['llama'] / 2), name) is None
    with pytest.raises(AssertionError, match="worst"):
        gpu_cases.assert_speculative(results(-0.1 - 2 * gpu_cases.LOGPROB_TOL['llama']), name)


def test_grammar_cases_compare_with_the_plain_grammar_run():
    """The structured-output case is checked against the plain run with the same grammars (not
    the plain greedy one), which the suite starts with it; outputs ended early by a grammar pass,
    and the case must have accepted whole paths."""
    name = "ddtree15-llama-oracle-first-grammar"
    assert gpu_cases.reference(name) == "plain-llama-grammar" and gpu_cases.reference("ddtree8-llama") == "plain-llama"
    assert len(gpu_cases.GRAMMARS) == len(gpu_cases.PROMPTS)
    greedy = [[5] * gpu_cases.REF_NEW] * 4
    constrained = [[7, 8, 2], [9] * 20, [6] * 40, [3] * 30]
    top = [_top2([((-0.1, 5), (-3.0, 6))] * len(o)) for o in constrained]
    res = {"plain-llama": dict(name="plain-llama", model="llama", rc=0, output_ids=greedy, top2=None,
                               graphs=["target decode"]),
           "plain-llama-grammar": dict(name="plain-llama-grammar", model="llama", rc=0, output_ids=constrained,
                                       top2=top, graphs=["target decode"])}
    gpu_cases.assert_plain(res, "llama-grammar")  # short outputs are fine for a grammar run

    def case(out, accept):
        return dict(res, **{name: dict(name=name, model="llama", rc=0, max_new_tokens=[gpu_cases.ORACLE_NEW] * 4,
                                       graphs=["target verify"], output_ids=out, ddtree={"verify_cuda_graph_steps": 2},
                                       meta_info=[{"spec_accept_length": accept}] * 4)})

    cut = [o[: gpu_cases.ORACLE_NEW] for o in constrained]
    assert gpu_cases.assert_speculative(case(cut, 9.0), name) is None
    with pytest.raises(AssertionError):  # the plain greedy output is not the reference
        gpu_cases.assert_speculative(case([o[: gpu_cases.ORACLE_NEW] for o in greedy], 9.0), name)
    with pytest.raises(AssertionError):  # nothing accepted beyond single tokens
        gpu_cases.assert_speculative(case(cut, 1.0), name)


def test_radix_rerun_checks_against_the_cacheless_rerun_and_dflash():
    ref = [list(range(i, i + 40)) for i in range(4)]
    top = [_top2([((-0.1, 5), (-3.0, 6))] * 40)] * 4
    plain = dict(name="plain-qwen35", model="qwen35", rc=0, output_ids=ref, top2=top, graphs=["target decode"])
    new = gpu_cases.MIXED_NEW
    at = gpu_cases.RERUN_AT
    # The cache-less rerun continues differently from the plain decode (prefill rounding).
    cont = [[100 + i] * (40 - at) for i in range(4)]
    top20 = [_top2([((-0.1, 5), (-3.0, 6))] * 20)] * 4

    def rec(name, rerun, **kw):
        return dict(name=name, model="qwen35", rc=0, max_new_tokens=new, graphs=["target verify"],
                    output_ids=[r[:n] for r, n in zip(ref, new)], meta_info=[{}] * 4, rerun=rerun, **kw)

    def results(rerun, ref_rerun=None, like=None):
        nocache = rec("nocache-qwen35-rerun", dict(dict(output_ids=cont, cached_tokens=[0] * 4, top2=top20),
                                                   **(ref_rerun or {})))
        dflash = rec("dflash-qwen35-radix", like or rerun)
        dd = rec("ddtree8-qwen35-radix", rerun, ddtree={"steps": 9, "verify_cuda_graph_steps": 9})
        return {r["name"]: r for r in (plain, nocache, dflash, dd)}

    good = dict(output_ids=cont, cached_tokens=[16, 16, 32, 5])
    assert gpu_cases.assert_speculative(results(good), "ddtree8-qwen35-radix") is None
    assert gpu_cases.assert_speculative(results(good), "nocache-qwen35-rerun") is None
    # Shallow cache hits that leave the cache-less rerun, as DFLASH's did on the tiny hybrid:
    # reported as the known limit, not as a pass.
    shallow = dict(output_ids=[[7] * 20] * 4, cached_tokens=[5, 3, 19, 9])
    assert gpu_cases.assert_speculative(results(shallow), "ddtree8-qwen35-radix").startswith("known:")
    for got, like in ((shallow, dict(shallow, cached_tokens=[16, 16, 32, 5])),  # cached other depths than DFLASH
                      (good, dict(good, output_ids=cont[:3] + [[99] * 20]))):  # continued otherwise than DFLASH
        with pytest.raises(AssertionError):
            gpu_cases.assert_speculative(results(got, like=like), "ddtree8-qwen35-radix")
    # DFLASH's rerun with log-probs: a cut at its near-tie passes, elsewhere it fails.
    like = dict(good, top2=[_top2([((-0.1, 5), (-0.12, 7))] + [((-0.1, 5), (-3.0, 6))] * 19)] * 4)
    tie = dict(good, output_ids=[[7] + c[1:] for c in cont])
    assert gpu_cases.assert_speculative(results(tie, like=like), "ddtree8-qwen35-radix").startswith("known:")
    with pytest.raises(AssertionError):
        gpu_cases.assert_speculative(results(dict(good, output_ids=[[8] + c[1:] for c in cont]), like=like),
                                     "ddtree8-qwen35-radix")
    # Extra-buffer cases (decode-time tracking): DDTREE reruns as sglang's DFLASH does; the
    # no-speculation control must have reused a tracked decode-time state (deep).
    def xb(rerun, like):
        r = results(rerun, like=like)
        r["ddtree8-qwen35-xb-radix"] = dict(r.pop("ddtree8-qwen35-radix"), name="ddtree8-qwen35-xb-radix")
        r["dflash-qwen35-xb-radix"] = dict(r.pop("dflash-qwen35-radix"), name="dflash-qwen35-xb-radix")
        r["nospec-qwen35-xb-radix"] = dict(r["dflash-qwen35-xb-radix"], name="nospec-qwen35-xb-radix")
        return r

    assert gpu_cases.assert_speculative(xb(good, good), "ddtree8-qwen35-xb-radix") is None
    with pytest.raises(AssertionError):  # other cache depths than DFLASH's
        gpu_cases.assert_speculative(xb(good, dict(good, cached_tokens=[0, 0, 0, 0])), "ddtree8-qwen35-xb-radix")
    assert gpu_cases.assert_speculative(xb(good, dict(good, cached_tokens=[0, 16, 0, 0])),
                                        "nospec-qwen35-xb-radix") is None
    with pytest.raises(AssertionError):  # deep: no rerun reused a tracked decode-time state
        gpu_cases.assert_speculative(xb(good, dict(good, cached_tokens=[5, 3, 15, 9])), "nospec-qwen35-xb-radix")
    # wy's documented cut (request 4 from position 11) against DFLASH; elsewhere it fails.
    def wy(got):
        r = results(got, like=good)
        r["ddtree8-qwen35-wy-radix"] = dict(r.pop("ddtree8-qwen35-radix"), name="ddtree8-qwen35-wy-radix")
        return r

    cut = [list(c) for c in cont]
    cut[3][11:] = [9] * (len(cut[3]) - 11)
    # (passes the DFLASH comparison; the cut request also leaves the cache-less rerun: known)
    assert gpu_cases.assert_speculative(wy(dict(good, output_ids=cut)), "ddtree8-qwen35-wy-radix").startswith("known:")
    early = [list(c) for c in cont]
    early[3][5] = 9
    with pytest.raises(AssertionError):
        gpu_cases.assert_speculative(wy(dict(good, output_ids=early)), "ddtree8-qwen35-wy-radix")
    with pytest.raises(AssertionError):  # the reference must not have read a cache
        gpu_cases.assert_speculative(results(good, dict(cached_tokens=[0, 5, 0, 0])), "nocache-qwen35-rerun")
    with pytest.raises(AssertionError):  # a radix case without its references fails, not passes
        gpu_cases.assert_speculative({k: v for k, v in results(good).items() if not k.startswith("nocache")},
                                     "ddtree8-qwen35-radix")


def test_placeholders_only_for_modules_that_fail(monkeypatch):
    missing = "sglang_ddtree_test_no_such_backend"
    monkeypatch.setattr(trimmed_bundle, "ISINSTANCE_ONLY", {missing: ("SomeBackend",), "json": ("JSONDecoder",)})
    import json

    with trimmed_bundle.placeholders_for_missing_backends() as added:
        assert added == [missing]
        from sglang_ddtree_test_no_such_backend import SomeBackend  # noqa: F401  (importable now)

        assert not isinstance(object(), SomeBackend)
        with pytest.raises(ImportError, match="unavailable"):
            sys.modules[missing].other_function  # noqa: B018
        assert sys.modules["json"] is json  # a module that imports is left alone
    assert missing not in sys.modules


def test_run_all_orders_plain_first_and_reuses_only_same_code(monkeypatch, tmp_path):
    import json
    import threading

    done, order, lock = set(), [], threading.Lock()

    def spawn(name, out, timeout_s):
        with lock:
            order.append(name)  # start order
        if gpu_cases.CASES[name][2].get("oracle"):  # an oracle case never starts before its plain run
            assert f"plain-{gpu_cases.CASES[name][0]}" in done, name
        rec = {"name": name, "rc": 0, "code_digest": gpu_cases.code_digest()}
        (out / f"{name}.result.json").write_text(json.dumps(rec))
        with lock:
            done.add(name)
        return rec

    monkeypatch.setattr(gpu_cases, "_spawn", spawn)
    monkeypatch.setattr(gpu_cases, "_path", lambda m: m)
    only = ["ddtree16-qwen35-wy-oracle-sibling", "ddtree8-llama"]
    res = gpu_cases.run_all(tmp_path, parallel=2, only=only, reuse=False)
    assert set(res) == {"plain-llama", "plain-qwen35", *only}
    assert set(order[:2]) == {"plain-llama", "plain-qwen35"}
    # Reuse: nothing runs again at the same code digest ...
    order.clear()
    gpu_cases.run_all(tmp_path, parallel=3, only=only, reuse=True)
    assert order == []
    # ... but a record from other package sources (or a failed one) is run again.
    rec = json.loads((tmp_path / "ddtree8-llama.result.json").read_text())
    (tmp_path / "ddtree8-llama.result.json").write_text(json.dumps(dict(rec, code_digest="other")))
    (tmp_path / "plain-llama.result.json").write_text(json.dumps(dict(rec, name="plain-llama", rc=1)))
    gpu_cases.run_all(tmp_path, parallel=3, only=only, reuse=True)
    assert sorted(order) == ["ddtree8-llama", "plain-llama"]


def test_backend_cases_run_on_their_backend_against_their_own_reference():
    """``NAME@BACKEND`` model keys: the tiny model NAME (head dim 64), target and drafter on
    BACKEND, compared with plain-NAME@BACKEND; they form their own suite."""
    import json
    from pathlib import Path

    for name in gpu_cases.BACKENDS:
        model, spec_fn, _ = gpu_cases.CASES[name]
        base, backend = model.split("@")
        assert backend in ("flashinfer", "triton") and f"plain-{model}" in gpu_cases.CASES
        kw = gpu_cases.engine_kwargs(model, spec_fn())
        assert kw["attention_backend"] == backend and Path(kw["model_path"]).name.startswith(base + "-v")
        if not name.startswith("plain-"):
            draft = Path(kw["speculative_draft_model_path"])
            assert draft.name.startswith(f"dflash-{base}-v")
            assert json.loads((draft / "config.json").read_text())["head_dim"] == 64
            mode = "snapshot" if "-snapshot" in name else "wy" if base.startswith("qwen35") else None
            assert kw.get("speculative_ddtree_gdn_mode") == (None if name.startswith("dflash-") else mode)
        assert json.loads((Path(kw["model_path"]) / "config.json").read_text())["head_dim"] == 64
    assert not set(gpu_cases.BACKENDS) & (set(gpu_cases.SMOKE) | set(gpu_cases.PREVIEW))
    assert {n.split("-", 1)[0] for n in gpu_cases.BACKENDS} == {"plain", "dflash", "ddtree16", "ddtree64", "ddtree"}


def test_a_case_held_to_sglangs_dflash_passes_only_as_its_exact_copy():
    """``spec_like``: a case that leaves the plain run (beyond a near tie) is reported as known
    only when sglang's DFLASH control leaves it too and the case equals the control token for
    token; otherwise it fails."""
    name, ctl = "ddtree64-qwen3564@flashinfer", "dflash-qwen3564@flashinfer"
    assert gpu_cases.CASES[name][2]["spec_like"] == ctl
    n = 8
    ref = [[5] * n] * 4
    top = [_top2([((-0.1, 5), (-3.0, 6))] * n)] * 4
    plain = dict(name="plain-qwen3564@flashinfer", model="qwen3564@flashinfer", rc=0, output_ids=ref, top2=top,
                 graphs=["target decode"])
    off = [[5, 5, 6, 6, 6, 6, 6, 6]] + [[5] * n] * 3  # request 0 leaves plain at a clear gap

    def rec(nm, out):
        return dict(name=nm, model="qwen3564@flashinfer", rc=0, max_new_tokens=[n] * 4, graphs=["target verify"],
                    output_ids=out, meta_info=[{}] * 4, ddtree={"verify_cuda_graph_steps": 3})

    def results(case_out, ctl_out):
        return {plain["name"]: plain, name: rec(name, case_out), ctl: rec(ctl, ctl_out)}

    assert gpu_cases.assert_speculative(results(ref, off), name) is None  # equal to plain: a pass
    assert gpu_cases.assert_speculative(results(off, off), name).startswith("known: equal to " + ctl)
    with pytest.raises(AssertionError, match="control_matches_plain"):
        gpu_cases.assert_speculative(results(off, ref), name)
    other = [[5, 5, 6, 7, 7, 7, 7, 7]] + [[5] * n] * 3
    with pytest.raises(AssertionError, match="like"):
        gpu_cases.assert_speculative(results(other, off), name)
