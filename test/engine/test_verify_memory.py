"""engine/verify_memory.py: what a DDTREE verify graph keeps beside the static pools, and the
automatic --mem-fraction-static lowered by it (budgets 64 / 128 / 256 and auto ran
out of memory capturing 64-request verify graphs of the 27B on the H200)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from sglang_ddtree.engine.verify_memory import (
    MARGIN,
    MIB,
    VerifyFootprint,
    apply_verify_reserve,
    attention_graph_bytes,
    lowered_fraction,
    planned_requests,
    verify_footprint,
    verify_reserve_mb,
)

# Qwen3.6-27B (design doc §2): 64 layers, 3 GatedDeltaNet per gated-attention layer.
QWEN36 = SimpleNamespace(text_config=SimpleNamespace(
    vocab_size=248320, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 16,
    linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
    num_attention_heads=24, head_dim=256, max_position_embeddings=262144))


def test_footprint_at_qwen36_27b_shapes():
    fp = verify_footprint(QWEN36, "wy", attention_backend="triton")
    assert fp.logits == 248320 * 4 and fp.logits_model == 248320 * 2
    # per GDN layer: x (bf16, q|k|v = 2*16*128 + 48*128 = 10240 channels), u (fp32 48 x 128), G (fp32 48)
    assert fp.wy == 48 * (10240 * 2 + 48 * 128 * 4 + 48 * 4) == 2_171_904
    # triton: int64 KV indices + uint8 tree mask over the 262144 context per verify token, and the
    # fp32 split-KV partials (24 heads x 8 splits x (256 + 1)).
    assert fp.attention == 262144 * 9 + 24 * 8 * 257 * 4
    assert fp.per_position == fp.logits + fp.logits_model + fp.wy + fp.attention
    snap = verify_footprint(QWEN36, "snapshot", attention_backend="triton")
    assert snap.wy == 0 and snap.attention == fp.attention and snap.logits == fp.logits
    assert verify_footprint(QWEN36, None).wy == 0
    # Tensor parallel: value, key and query heads split across ranks, the logits are gathered in full.
    tp2 = verify_footprint(QWEN36, "wy", tp_size=2, attention_backend="triton")
    assert tp2.logits == fp.logits and tp2.wy == 48 * (5120 * 2 + 24 * 128 * 4 + 24 * 4)
    assert tp2.attention == 262144 * 9 + 12 * 8 * 257 * 4
    # sglang's own hybrid configs list the layers instead (Qwen3_5TextConfig.linear_layer_ids).
    listed = SimpleNamespace(**{k: v for k, v in vars(QWEN36.text_config).items() if k != "layer_types"},
                             linear_layer_ids=[i for i in range(64) if i % 4 != 3])
    assert verify_footprint(listed, "wy", attention_backend="triton") == fp
    # A dense target has no GDN layers; head_dim from hidden_size when the config has none.
    dense = SimpleNamespace(vocab_size=1000, layer_types=None, num_attention_heads=4, hidden_size=64,
                            max_position_embeddings=128)
    assert verify_footprint(dense, "wy", attention_backend="triton") == VerifyFootprint(
        4000, 2000, 0, 128 * 9 + 4 * 8 * 17 * 4)


def test_attention_buffers_by_backend_and_context():
    # A given --context-length replaces the config's; the per-context bytes scale with it.
    short = verify_footprint(QWEN36, "wy", attention_backend="triton", context_len=8192)
    assert short.attention == 8192 * 9 + 24 * 8 * 257 * 4
    assert attention_graph_bytes("flashinfer", 8192, 24, 256) == 8192 * 5
    # Page-table backends keep one row per request, not per token.
    assert attention_graph_bytes("fa3", 262144, 24, 256) == 262144 * 4 // 16
    # Not resolved yet, or a backend this module does not know: counted as triton (the largest).
    assert attention_graph_bytes(None, 8192, 24, 256) == attention_graph_bytes("triton", 8192, 24, 256)
    assert attention_graph_bytes("some_new_backend", 8192, 24, 256) == attention_graph_bytes("triton", 8192, 24, 256)


def test_reserve_matches_the_h200_graph_captures():
    """results/ARCHIVE.md (27B, triton, 262144 context, 64 requests): the chain's verify graphs
    (64 x 16 positions) took 6.30 GB; budget 64's capture ran out of memory with 24.6 GB beside the
    pools (sglang's automatic fraction less an earlier reserve, which counted only the fp32
    logits and the wy inputs: 12.3 GiB); its pre-forward buffers alone took 13.8 GB (3.3 MB per
    position: the triton indices and mask, the fp32 logits)."""
    fp = verify_footprint(QWEN36, "wy", attention_backend="triton")
    chain_listed = 64 * 16 * fp.per_position
    assert abs(chain_listed / 1e9 - 6.30) / 6.30 < 0.05
    assert abs(64 * 65 * (fp.logits + fp.attention) / 1e9 - 13.8) / 13.8 < 0.1
    need64 = verify_reserve_mb(fp, 64, [65])
    assert need64 * MIB == pytest.approx(MARGIN * 64 * 65 * fp.per_position)
    assert need64 / 1024 > 24.6 / 1.074  # more than what the failed capture had
    # Budget auto: the widest width's shared buffers, every width's attention buffers and lm_head output.
    auto = verify_reserve_mb(fp, 64, [16, 17, 33])
    shared = fp.logits + fp.wy
    assert auto * MIB == pytest.approx(MARGIN * 64 * (33 * shared + (16 + 17 + 33) * (fp.attention + fp.logits_model)))
    assert auto > verify_reserve_mb(fp, 64, [33])
    assert verify_reserve_mb(fp, 64, [33, 33]) == verify_reserve_mb(fp, 64, [33])
    assert verify_reserve_mb(fp, 0, [17]) == 0 and verify_reserve_mb(fp, 4, []) == 0


def test_reserve_matches_the_h200_auto_captures():
    """results/ARCHIVE.md (27B, triton, context 8192, budget auto with width caps): width 257's
    graphs at 1 / 4 / 16 requests took 20.22 GB (with the shared logits buffer made for 129 x 64
    rows and the wy inputs for its own 257 x 16); width 129's at up to 64 requests 23.9 GB more,
    of which 17.9 GB a second wy storage (now made once for the most rows). Listed per width
    without that second storage: 129 x 64 x (lm_head output + attention) = 6.3 GB."""
    fp = verify_footprint(QWEN36, "wy", attention_backend="triton", context_len=8192)
    first = 129 * 64 * fp.logits + 257 * 16 * (fp.wy + fp.logits_model + fp.attention)
    assert abs(first / 1e9 - 20.22) / 20.22 < 0.05
    second = 129 * 64 * (fp.wy + fp.logits_model + fp.attention)
    assert abs(second / 1e9 - 23.9) / 23.9 < 0.05
    # Both widths in the reserve (the second storage gone): the shared part once, at 129 x 64.
    need = verify_reserve_mb(fp, 64, [129, 257], {257: 16})
    listed = 129 * 64 * (fp.logits + fp.wy) + (129 * 64 + 257 * 16) * (fp.logits_model + fp.attention)
    assert need * MIB == pytest.approx(MARGIN * listed)


def _sa(fraction, max_running=None, max_bs=64):
    return SimpleNamespace(mem_fraction_static=fraction, max_running_requests=max_running,
                           cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(max_bs=max_bs)))


def test_planned_requests():
    assert planned_requests(_sa(0.9, max_running=16)) == 16
    assert planned_requests(_sa(0.9, max_bs=48)) == 48
    assert planned_requests(_sa(0.9, max_bs=None)) == 1


def test_automatic_fraction_is_lowered_and_a_given_one_kept_with_a_warning(caplog):
    fp = verify_footprint(QWEN36, "wy", attention_backend="triton", context_len=8192)
    gpu = 143_771.0  # the H200's MiB
    need = verify_reserve_mb(fp, 64, [129])
    auto = _sa(0.908)
    assert apply_verify_reserve(auto, False, gpu, [129], fp) == need
    assert auto.mem_fraction_static == lowered_fraction(0.908, gpu, need) == round(0.908 - need / gpu, 3)
    assert auto.mem_fraction_static < 0.75
    given = _sa(0.85)
    with caplog.at_level(logging.WARNING, logger="sglang_ddtree.engine.verify_memory"):
        assert apply_verify_reserve(given, True, gpu, [129], fp) == need
    assert given.mem_fraction_static == 0.85
    msg = "\n".join(r.getMessage() for r in caplog.records)
    assert f"--mem-fraction-static {lowered_fraction(0.85, gpu, need):.3f} or lower" in msg
    caplog.clear()
    small = _sa(0.85)  # budget 16: ~4.7 GB of the ~21 GB left; no warning
    with caplog.at_level(logging.WARNING, logger="sglang_ddtree.engine.verify_memory"):
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


@pytest.mark.ddtree_cuda_path
def test_launch_lowers_only_ddtrees_automatic_fraction(server_args_cls, monkeypatch):
    """Through ServerArgs (tiny hybrid, wy): the automatic fraction is sglang's own less the verify
    graphs' need computed from the model config here; a given fraction is kept."""
    import json

    import sglang.srt.server_args as sa
    import sglang.srt.utils.common as common

    from sglang_ddtree.testing import tiny_models

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
    # fp32 logits buffer + the fp32 lm_head output + the wy inputs + the attention graph buffers
    # (this CPU build's backend is not one the reserve knows: counted as triton's, over the
    # config's context).
    per_position = (cfg["vocab_size"] * 4 * 2 + gdn * ((2 * hk * dk + hv * dv) * 4 + hv * dv * 4 + hv * 4)
                    + cfg["max_position_embeddings"] * 9 + cfg["num_attention_heads"] * 8 * (cfg["head_dim"] + 1) * 4)
    need = MARGIN * 1024 * ddtree.speculative_num_draft_tokens * per_position / MIB
    assert ddtree.speculative_num_draft_tokens == 16
    assert ddtree.mem_fraction_static == round(plain - need / gpu, 3) < plain
    # What the launch error of compat/kv_room_message.py reports: the same need, nothing changed.
    from sglang_ddtree.engine.verify_memory import server_need

    before = ddtree.mem_fraction_static
    assert server_need(ddtree, 16) == (pytest.approx(need), 1024, [16]) and ddtree.mem_fraction_static == before
    given = server_args_cls(**base, **spec, mem_fraction_static=0.5)
    assert given.mem_fraction_static == 0.5
    # The launch-time mark is gone afterwards (vars(server_args) is what /server_info reports).
    assert not [k for k in vars(ddtree) if k.startswith("_ddtree")] and not [k for k in vars(given) if k.startswith("_ddtree")]


def test_reserve_counts_each_width_at_its_own_batch():
    fp = VerifyFootprint(logits=1000, logits_model=500, wy=2000, attention=300)
    shared, own = 3000, 800  # logits + wy once; lm_head output + attention per width
    # widths 16 (any), 65 up to 16, 257 up to 16 requests, at 64 requests
    per_width = {65: 16, 257: 16}
    need = verify_reserve_mb(fp, 64, [16, 65, 257], per_width)
    rows = [64 * 16, 16 * 65, 16 * 257]
    assert need * MIB == pytest.approx(MARGIN * (max(rows) * shared + sum(rows) * own))
    assert need < verify_reserve_mb(fp, 64, [16, 65, 257])  # uncapped: 64 x 257 shared
    assert verify_reserve_mb(fp, 8, [16, 257], {257: 16}) == verify_reserve_mb(fp, 8, [16, 257])

