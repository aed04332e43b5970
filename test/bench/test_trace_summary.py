"""benchmark/ddtree/trace_summary.py: per-decode-step device time by kernel from two profiler
traces (few / more decode steps) of one engine — on synthetic traces with known answers."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark" / "ddtree"))
import trace_summary as ts  # noqa: E402


def _trace(steps: int, prefill_us: float = 5000.0) -> list:
    """A prefill (one GEMM and one attention kernel), then ``steps`` decode steps of three
    kernels and a copy, plus CPU events that must not count as device time."""
    ev = [{"ph": "X", "cat": "kernel", "name": "gemm", "dur": prefill_us},
          {"ph": "X", "cat": "kernel", "name": "extend_attn", "dur": 800.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 9e6}]
    for _ in range(steps):
        ev += [{"ph": "X", "cat": "kernel", "name": "gemm", "dur": 1000.0},
               {"ph": "X", "cat": "kernel", "name": "tree_gdn_verify", "dur": 250.0},
               {"ph": "X", "cat": "kernel", "name": "x" * 300, "dur": 10.0},
               {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "dur": 40.0},
               {"ph": "i", "cat": "kernel", "name": "marker"}]  # not a complete event
    return ev


def _write(path: Path, events: list, gz: bool) -> Path:
    data = json.dumps({"traceEvents": events})
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(data)
    else:
        path.write_text(data)
    return path


@pytest.mark.parametrize("gz", [True, False])
def test_prefill_cancels_and_each_kernel_gets_its_step_time(tmp_path, gz):
    short = _write(tmp_path / ("s.trace.json" + (".gz" if gz else "")), _trace(3), gz)
    long = _write(tmp_path / ("l.trace.json" + (".gz" if gz else "")), _trace(11, prefill_us=5100.0), gz)
    out = ts.summarize(short, long, 3, 11, top=3)
    assert out["kind"] == "device" and out["decode_steps"] == [3, 11]
    top = dict(out["top"])
    assert len(out["top"]) == 3 and list(top)[:2] == ["gemm", "tree_gdn_verify"]
    # gemm: 1.0 ms a step, plus the two prefills' 0.1 ms difference spread over 8 steps
    assert top["gemm"] == pytest.approx(1.0 + 0.1 / 8, abs=1e-4)
    assert top["tree_gdn_verify"] == pytest.approx(0.25) and top["Memcpy HtoD"] == pytest.approx(0.04)
    assert out["ms_per_step"] == pytest.approx(1.0 + 0.1 / 8 + 0.25 + 0.04 + 0.01, abs=1e-4)  # no cpu_op
    # one launch of each of the top three per step; the prefill's extra gemm cancels; four in all
    assert out["launches"] == {"gemm": 1.0, "tree_gdn_verify": 1.0, "Memcpy HtoD": 1.0}
    assert out["launches_per_step"] == 4.0


def test_long_names_are_cut_and_cpu_only_traces_are_labelled(tmp_path):
    out = ts.per_step({"x" * 300: 10.0}, {"x" * 300: 90.0}, 1, 9)
    assert out["top"][0][0].endswith("...") and len(out["top"][0][0]) == 120
    cpu = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 100.0 * k} for k in (1, 1)]
    assert ts.trace_kind(cpu) == "cpu_op" and ts.totals(cpu) == {}
    assert ts.totals(cpu, ("cpu_op",)) == {"aten::mm": 200.0}


def test_bad_inputs_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="needs more decode steps"):
        ts.per_step({}, {}, 4, 4)
    assert ts.find_trace(tmp_path) is None
    for name in ("a.trace.json.gz", "b.trace.json.gz"):
        (tmp_path / name).write_text("{}")
    with pytest.raises(ValueError, match="2 traces"):
        ts.find_trace(tmp_path)


def test_difference_below_noise_is_flagged():
    """A positive total is a time; a total that is not positive (the longer pass summed less: noise,
    e.g. host time on a busy CPU) is flagged as measuring nothing."""
    ok = ts.per_step({"a": 1000.0, "b": 500.0}, {"a": 4000.0, "b": 400.0}, 1, 4)
    assert ok["ms_per_step"] == round((3000 - 100) / 3 / 1e3, 4) and "noise" not in ok
    assert ok["top"] == [["a", 1.0]]  # the negative name is left out of the list
    bad = ts.per_step({"a": 5000.0}, {"a": 4000.0}, 1, 7)
    assert bad["ms_per_step"] < 0 and "measure nothing" in bad["noise"]


def test_kernels_are_summed_by_family(tmp_path):
    short = _write(tmp_path / "s.trace.json", _trace(3), False)
    long = _write(tmp_path / "l.trace.json", _trace(11, prefill_us=5100.0), False)
    cats = ts.summarize(short, long, 3, 11)["by_category"]
    assert cats["gemm"] == pytest.approx(1.0 + 0.1 / 8, abs=1e-4)
    assert cats["gdn"] == pytest.approx(0.25) and cats["copy_elementwise"] == pytest.approx(0.04)
    assert cats["other"] == pytest.approx(0.01)
    assert sum(cats.values()) == pytest.approx(ts.summarize(short, long, 3, 11)["ms_per_step"], abs=1e-3)


@pytest.mark.parametrize("name,family", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1", "gemm"),
    ("nvjet_tst_64x8_64x16_2x1_v_bz_splitK_TNN", "gemm"),
    ("_fwd_kernel", "attention"), ("_tree_twostage_apply_kernel", "gdn"), ("_tree_conv_kernel", "gdn"),
    ("gdn_tree_commit_from_x_layers_kernel", "gdn"), ("void at::native::sbtopk::gatherTopK<float>", "topk_sort"),
    # sglang's own GatedDeltaNet verify and its state scatter (DFLASH's step)
    ("fused_sigmoid_gating_delta_rule_update_kernel", "gdn"), ("_fused_mamba_state_scatter_with_mask_kernel", "gdn"),
    ("_chunk_topk_kernel", "topk_sort"), ("_merge_topk_kernel", "topk_sort"),
    ("fused_add_rmsnorm_kernel", "norm"),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "norm"),  # not attention
    ("_tree_attn_split_kernel", "attention"), ("_tree_attn_combine_kernel", "attention"), ("void at::native::vectorized_elementwise_kernel<4>", "copy_elementwise"),
    ("Memcpy DtoD (Device -> Device)", "copy_elementwise"), ("some_new_kernel", "other"),
    ("_skinny_kernel", "gemm"), ("_split_sum_kernel", "gemm"),  # kernels/skinny_gemm.py
    ("_tree_gdn_fwd_kernel", "gdn"),  # the one-chunk tree GatedDeltaNet (budget 15, the chain)
])
def test_kernel_families_by_name(name, family):
    assert ts.category(name) == family


def _phased_trace(steps: int) -> list:
    """Each decode step: a draft phase (a GEMM), a verify phase (a GEMM, attention, a GDN kernel)
    and, between phases, a copy; the annotation spans on the GPU timeline of device 0; a kernel
    of another device inside the same times counts outside."""
    ev, t = [], 0.0
    for _ in range(steps):
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "ddtree.draft", "pid": 0, "ts": t, "dur": 100.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "pid": 0, "ts": t + 1, "dur": 90.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "pid": 1, "ts": t + 1, "dur": 7.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "elementwise_copy", "pid": 0, "ts": t + 100, "dur": 20.0})
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "ddtree.verify", "pid": 0, "ts": t + 130, "dur": 500.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "pid": 0, "ts": t + 130, "dur": 300.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "_fwd_kernel", "pid": 0, "ts": t + 430, "dur": 100.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "_tree_conv_kernel", "pid": 0, "ts": t + 530, "dur": 50.0})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "ts": t + 140, "dur": 50.0})
        t += 1000.0
    return ev


def test_device_time_by_phase_and_family(tmp_path):
    short = _write(tmp_path / "s.trace.json", _phased_trace(2), False)
    long = _write(tmp_path / "l.trace.json", _phased_trace(6), False)
    by = ts.summarize(short, long, 2, 6)["by_phase"]
    assert by == {"draft": {"gemm": 0.09}, "verify": {"gemm": 0.3, "attention": 0.1, "gdn": 0.05},
                  "outside": {"copy_elementwise": 0.02, "gemm": 0.007}}
