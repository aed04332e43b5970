"""compat/verify_memory.py: what a DDTREE verify graph keeps beside the static pools, and the
automatic --mem-fraction-static lowered by it (session 14: budgets 64 / 128 / 256 and auto ran
out of memory capturing 64-request verify graphs of the 27B on the H200)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from sglang_ddtree.compat.verify_memory import (
    MIB,
    VerifyFootprint,
    apply_verify_reserve,
    lowered_fraction,
    planned_requests,
    verify_footprint,
    verify_reserve_mb,
)

# Qwen3.6-27B (design doc §2): 64 layers, 3 GatedDeltaNet per gated-attention layer.
QWEN36 = SimpleNamespace(text_config=SimpleNamespace(
    vocab_size=248320, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 16,
    linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128))


def test_footprint_at_qwen36_27b_shapes():
    fp = verify_footprint(QWEN36, "wy")
    assert fp.logits == 248320 * 4
    # per GDN layer: x (bf16, q|k|v = 2*16*128 + 48*128 = 10240 channels), u (fp32 48 x 128), G (fp32 48)
    assert fp.wy == 48 * (10240 * 2 + 48 * 128 * 4 + 48 * 4) == 2_171_904
    assert verify_footprint(QWEN36, "snapshot") == VerifyFootprint(248320 * 4, 0)
    assert verify_footprint(QWEN36, None).wy == 0
    # Tensor parallel: value and key heads split across ranks, the logits are gathered in full.
    tp2 = verify_footprint(QWEN36, "wy", tp_size=2)
    assert tp2.logits == fp.logits and tp2.wy == 48 * (5120 * 2 + 24 * 128 * 4 + 24 * 4)
    # sglang's own hybrid configs list the layers instead (Qwen3_5TextConfig.linear_layer_ids).
    listed = SimpleNamespace(**{k: v for k, v in vars(QWEN36.text_config).items() if k != "layer_types"},
                             linear_layer_ids=[i for i in range(64) if i % 4 != 3])
    assert verify_footprint(listed, "wy") == fp
    # A dense target has no GDN layers.
    dense = SimpleNamespace(vocab_size=1000, layer_types=None)
    assert verify_footprint(dense, "wy") == VerifyFootprint(4000, 0)


def test_reserve_matches_the_allocations_that_failed_on_the_h200():
    """RESULTS.md session 14: budget 64 at 64 requests failed allocating u (4.57 GiB), budget 128
    its fp32 logits (7.64 GiB); the reserve counts both and x."""
    fp = verify_footprint(QWEN36, "wy")
    u64 = 48 * 64 * 65 * 48 * 128 * 4
    assert abs(u64 / 2**30 - 4.57) < 0.01
    assert abs(64 * 129 * fp.logits / 2**30 - 7.64) < 0.01
    need64 = verify_reserve_mb(fp, 64, [65])
    assert need64 * MIB == 64 * 65 * (fp.logits + fp.wy)
    assert 12.0 < need64 / 1024 < 12.5
    # Budget auto: the widest width's logits and commit inputs (the widths share both).
    auto = verify_reserve_mb(fp, 64, [16, 17, 33])
    assert auto == verify_reserve_mb(fp, 64, [33]) and auto * MIB == 64 * 33 * (fp.logits + fp.wy)
    assert verify_reserve_mb(fp, 0, [17]) == 0 and verify_reserve_mb(fp, 4, []) == 0


def _sa(fraction, max_running=None, max_bs=64):
    return SimpleNamespace(mem_fraction_static=fraction, max_running_requests=max_running,
                           cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(max_bs=max_bs)))


def test_planned_requests():
    assert planned_requests(_sa(0.9, max_running=16)) == 16
    assert planned_requests(_sa(0.9, max_bs=48)) == 48
    assert planned_requests(_sa(0.9, max_bs=None)) == 1


def test_automatic_fraction_is_lowered_and_a_given_one_kept_with_a_warning(caplog):
    fp = verify_footprint(QWEN36, "wy")
    gpu = 143_771.0  # the H200's MiB
    need = verify_reserve_mb(fp, 64, [129])
    auto = _sa(0.908)
    assert apply_verify_reserve(auto, False, gpu, [129], fp) == need
    assert auto.mem_fraction_static == lowered_fraction(0.908, gpu, need) == round(0.908 - need / gpu, 3)
    assert auto.mem_fraction_static < 0.75
    given = _sa(0.85)
    with caplog.at_level(logging.WARNING, logger="sglang_ddtree.compat.verify_memory"):
        assert apply_verify_reserve(given, True, gpu, [129], fp) == need
    assert given.mem_fraction_static == 0.85
    msg = "\n".join(r.getMessage() for r in caplog.records)
    assert f"--mem-fraction-static {lowered_fraction(0.85, gpu, need):.3f} or lower" in msg
    caplog.clear()
    small = _sa(0.85)  # budget 16: ~3.4 GB of the ~21 GB left; no warning
    with caplog.at_level(logging.WARNING, logger="sglang_ddtree.compat.verify_memory"):
        apply_verify_reserve(small, True, gpu, [17], fp)
    assert small.mem_fraction_static == 0.85 and not caplog.records
    # A verify that leaves the pools almost nothing is refused at launch, naming what to lower.
    huge = _sa(0.908, max_running=256)
    with pytest.raises(ValueError, match="lower --speculative-ddtree-budget"):
        apply_verify_reserve(huge, False, gpu, [257], fp)
    assert huge.mem_fraction_static == 0.908
    # Device memory unknown: nothing changes.
    unknown = _sa(0.88)
    assert apply_verify_reserve(unknown, False, None, [129], fp) is None and unknown.mem_fraction_static == 0.88


@pytest.fixture(scope="module")
def server_args_cls():
    from sglang.srt.plugins import load_plugins

    load_plugins()
    import sglang.srt.server_args as sa

    return sa.ServerArgs


def test_launch_lowers_only_ddtrees_automatic_fraction(server_args_cls, monkeypatch):
    """Through ServerArgs (tiny hybrid, wy): the automatic fraction is sglang's own less the verify
    graphs' need computed from the model config here; a given fraction is kept."""
    import json

    import sglang.srt.server_args as sa
    import sglang.srt.utils.common as common

    from sglang_ddtree import tiny_models

    gpu = 16000.0
    monkeypatch.setattr(sa, "get_device_memory_capacity", lambda *a, **k: gpu)
    monkeypatch.setattr(common, "get_device_memory_capacity", lambda *a, **k: gpu)
    target = tiny_models.model_path("qwen35")
    base = dict(model_path=str(target), device="cpu", dtype="float32", disable_overlap_schedule=True,
                max_running_requests=1024)
    spec = dict(speculative_algorithm="DDTREE", speculative_ddtree_gdn_mode="wy",
                speculative_draft_model_path=str(tiny_models.model_path("dflash-qwen35")))
    plain = server_args_cls(**base).mem_fraction_static
    ddtree = server_args_cls(**base, **spec)
    cfg = json.loads((target / "config.json").read_text())
    gdn = sum(t == "linear_attention" for t in cfg["layer_types"])
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    per_position = cfg["vocab_size"] * 4 + gdn * ((2 * hk * dk + hv * dv) * 4 + hv * dv * 4 + hv * 4)
    need = 1024 * ddtree.speculative_num_draft_tokens * per_position / MIB
    assert ddtree.speculative_num_draft_tokens == 17
    assert ddtree.mem_fraction_static == round(plain - need / gpu, 3) < plain
    given = server_args_cls(**base, **spec, mem_fraction_static=0.5)
    assert given.mem_fraction_static == 0.5
    # The launch-time mark is gone afterwards (vars(server_args) is what /server_info reports).
    assert not [k for k in vars(ddtree) if k.startswith("_ddtree")] and not [k for k in vars(given) if k.startswith("_ddtree")]
