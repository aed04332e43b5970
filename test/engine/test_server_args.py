"""DDTREE flags: defaults, validation and unsupported combinations fail at launch naming the flag."""

from __future__ import annotations

import pytest

from sglang_ddtree.compat import releases
from sglang_ddtree.testing import tiny_models


@pytest.fixture(scope="module")
def server_args_cls():
    from sglang.srt.plugins import load_plugins

    load_plugins()  # what sglang's launcher does first; applies our ServerArgs hooks
    import sglang.srt.server_args as sa

    from sglang_ddtree.server_args import DDTreeServerArgs

    assert sa.ServerArgs is DDTreeServerArgs
    return DDTreeServerArgs


def _args(cls, **kw):
    base = dict(
        model_path=str(tiny_models.model_path("llama")), device="cpu", dtype="float32",
        speculative_algorithm="DDTREE",
        speculative_draft_model_path=str(tiny_models.model_path("dflash-llama")),
        disable_overlap_schedule=True,
    )
    base.update(kw)
    return resolved(cls(**base))


def resolved(args):
    """The arguments as the launcher resolves them: sglang 0.5.17 resolves in construction;
    0.5.23 keeps the operator's input on the record and resolves in ``resolve_once`` (read back
    through ``compat.releases.resolved``)."""
    if releases.CURRENT.resolves_in_post_init:
        return args
    args.resolve_once()
    return releases.resolved(args)


def test_defaults_and_verify_width(server_args_cls):
    a = _args(server_args_cls)
    assert a.speculative_ddtree_budget == 15  # DEFAULT_BUDGET
    assert a.speculative_ddtree_topk == 8
    assert a.speculative_ddtree_max_depth == 15  # block 16 - 1
    assert a.speculative_num_draft_tokens == 16  # budget + root
    small = _args(server_args_cls, speculative_ddtree_budget=8)
    assert small.speculative_num_draft_tokens == 16  # at least one draft block


@pytest.mark.parametrize("kw,flag", [
    (dict(speculative_ddtree_budget=0), "--speculative-ddtree-budget"),
    (dict(speculative_ddtree_budget=5000), "--speculative-ddtree-budget"),
    (dict(speculative_ddtree_topk=0), "--speculative-ddtree-topk"),
    (dict(speculative_ddtree_max_depth=16), "--speculative-ddtree-max-depth"),
    (dict(speculative_ddtree_oracle_rate=1.5), "--speculative-ddtree-oracle-rate"),
    (dict(speculative_ddtree_gdn_mode="chunked"), "--speculative-ddtree-gdn-mode"),
    (dict(speculative_ddtree_budget="big"), "--speculative-ddtree-budget"),
    (dict(speculative_ddtree_budget="auto"), "--speculative-ddtree-step-cost"),
    (dict(speculative_ddtree_budget="auto", speculative_ddtree_step_cost="/nonexistent.json"),
     "--speculative-ddtree-step-cost"),
    (dict(speculative_ddtree_budget=16, speculative_ddtree_step_cost="/tmp/x.json"), "--speculative-ddtree-step-cost"),
    (dict(page_size=16, speculative_ddtree_oracle_rate=0.5), "--speculative-ddtree-oracle-rate needs --page-size 1"),
    (dict(pp_size=2), "--pp-size"),
    (dict(speculative_draft_window_size=64), "--speculative-draft-window-size"),
    (dict(mamba_radix_cache_strategy="extra_buffer_lazy"), "--mamba-radix-cache-strategy"),
    (dict(speculative_ddtree_tree_attention="fast"), "--speculative-ddtree-tree-attention must be one of"),
    (dict(speculative_ddtree_tree_attention="split-kv", attention_backend="flashinfer"),
     "--speculative-ddtree-tree-attention split-kv runs on --attention-backend triton"),
    (dict(attention_backend="fa3"), "applies the tree mask .*--attention-backend fa3: add --attention-backend triton"),
    (dict(attention_backend="triton", decode_attention_backend="torch_native"), "--decode-attention-backend torch_native"),
])
def test_invalid_values_fail_naming_the_flag(server_args_cls, kw, flag):
    with pytest.raises(ValueError, match=flag):
        _args(server_args_cls, **kw)


def test_oracle_rate_is_accepted(server_args_cls):
    assert _args(server_args_cls, speculative_ddtree_oracle_rate=0.25).speculative_ddtree_oracle_rate == 0.25


def test_gdn_mode_wy_is_accepted(server_args_cls):
    b = _args(server_args_cls, speculative_ddtree_gdn_mode="wy")
    assert b.speculative_ddtree_gdn_mode == "wy"
    assert _args(server_args_cls, speculative_ddtree_gdn_mode="snapshot").speculative_ddtree_gdn_mode == "snapshot"


@pytest.mark.ddtree_cuda_path
def test_gdn_mode_default_is_wy_except_with_the_no_buffer_radix_cache(server_args_cls):
    # wy measured faster at 27B size; its state tracking (extra_buffer) matched sglang's per-node
    # path on the H200; under no_buffer a rerun left DFLASH's at one token.
    assert _hybrid(server_args_cls).speculative_ddtree_gdn_mode == "wy"
    assert _hybrid(server_args_cls, disable_radix_cache=True).speculative_ddtree_gdn_mode == "wy"
    assert _hybrid(server_args_cls, mamba_radix_cache_strategy="no_buffer").speculative_ddtree_gdn_mode == "snapshot"
    # An explicit choice is kept either way.
    assert _hybrid(server_args_cls, disable_radix_cache=True,
                   speculative_ddtree_gdn_mode="snapshot").speculative_ddtree_gdn_mode == "snapshot"
    assert _hybrid(server_args_cls, mamba_radix_cache_strategy="no_buffer",
                   speculative_ddtree_gdn_mode="wy").speculative_ddtree_gdn_mode == "wy"


def test_wy_cross_check_needs_the_eager_verify(server_args_cls, monkeypatch):
    assert _args(server_args_cls, speculative_ddtree_gdn_mode="wy").speculative_ddtree_gdn_mode == "wy"
    monkeypatch.setenv("SGLANG_DDTREE_WY_CHECK", "1")
    with pytest.raises(ValueError, match="--speculative-ddtree-eager-verify"):
        _args(server_args_cls, speculative_ddtree_gdn_mode="wy")
    a = _args(server_args_cls, speculative_ddtree_gdn_mode="wy", speculative_ddtree_eager_verify=True)
    assert a.speculative_ddtree_gdn_mode == "wy" and a.speculative_ddtree_eager_verify is True


def test_eager_verify_is_a_ddtree_flag(server_args_cls):
    assert _args(server_args_cls).speculative_ddtree_eager_verify is False
    with pytest.raises(ValueError, match="--speculative-ddtree-eager-verify require"):
        _args(server_args_cls, speculative_algorithm="DFLASH", speculative_ddtree_eager_verify=True)


def test_tree_attention_kernel_choices(server_args_cls):
    assert _args(server_args_cls).speculative_ddtree_tree_attention == "auto"
    assert _args(server_args_cls, speculative_ddtree_tree_attention="backend").speculative_ddtree_tree_attention \
        == "backend"
    with pytest.raises(ValueError, match="--attention-backend intel_amx"):  # the CPU engine's backend
        _args(server_args_cls, speculative_ddtree_tree_attention="split-kv")
    with pytest.raises(ValueError, match="--speculative-ddtree-tree-attention require"):
        _args(server_args_cls, speculative_algorithm="DFLASH", speculative_ddtree_tree_attention="backend")


def test_gemm_table_flag(server_args_cls, tmp_path):
    """``auto`` (the default) and ``none`` start anywhere; a path is refused at launch naming the
    flag when it is no file, no table, or (this CPU machine) has no CUDA GPU to run it on."""
    assert _args(server_args_cls).speculative_ddtree_gemm_table == "auto"
    assert _args(server_args_cls, speculative_ddtree_gemm_table="none").speculative_ddtree_gemm_table == "none"
    with pytest.raises(ValueError, match="--speculative-ddtree-gemm-table must be auto, none or the path"):
        _args(server_args_cls, speculative_ddtree_gemm_table="fast")
    table = tmp_path / "t.json"
    table.write_text('{"meta": {"device": "NVIDIA H100 80GB HBM3"}, "rows": []}')
    with pytest.raises(ValueError, match="--speculative-ddtree-gemm-table .*CUDA GPUs only"):
        _args(server_args_cls, speculative_ddtree_gemm_table=str(table))
    with pytest.raises(ValueError, match="--speculative-ddtree-gemm-table require"):
        _args(server_args_cls, speculative_algorithm="DFLASH", speculative_ddtree_gemm_table="none")


def test_shadow_linear_is_accepted(server_args_cls):
    assert _args(server_args_cls, speculative_ddtree_shadow_linear=True).speculative_ddtree_shadow_linear is True


def test_ddtree_flags_need_the_ddtree_algorithm(server_args_cls):
    with pytest.raises(ValueError, match="--speculative-ddtree-budget require"):
        _args(server_args_cls, speculative_algorithm="DFLASH", speculative_ddtree_budget=16)


def _hybrid(cls, **kw):
    return _args(
        cls, model_path=str(tiny_models.model_path("qwen35")),
        speculative_draft_model_path=str(tiny_models.model_path("dflash-qwen35")), **kw,
    )


def test_hybrid_target_served_through_the_snapshot_path_when_asked(server_args_cls):
    # Server args only (the hybrid model cannot run on CPU: test/compat/test_cpu.py); the
    # GPU smoke suite runs DDTREE on the tiny hybrid end to end.
    from sglang_ddtree.server_args import is_hybrid_target

    a = _hybrid(server_args_cls, speculative_ddtree_gdn_mode="snapshot")
    assert is_hybrid_target(a)
    assert a.speculative_ddtree_gdn_mode == "snapshot"
    assert a.speculative_num_draft_tokens == 16


def test_cli_has_the_flags(server_args_cls):
    import argparse

    p = argparse.ArgumentParser()
    server_args_cls.add_cli_args(p)
    ns = p.parse_args(["--model-path", "m", "--speculative-ddtree-budget", "64", "--speculative-ddtree-topk", "4"])
    # The budget parses as text ("64" or "auto"); launch validation makes it an integer.
    assert ns.speculative_ddtree_budget == "64" and ns.speculative_ddtree_topk == 4
    assert p.parse_args(["--model-path", "m", "--speculative-ddtree-budget", "auto"]).speculative_ddtree_budget == "auto"
    assert "--speculative-ddtree-step-cost" in p.format_help()
    assert "--speculative-ddtree-max-depth" in p.format_help()


def test_budget_auto_takes_the_tables_largest_budget(server_args_cls, tmp_path):
    import json

    table = tmp_path / "sc.json"
    table.write_text(json.dumps({"rows": [
        {"config": c, "concurrency": 1, "ms_per_step": 1.0} for c in ("DFLASH", "DDTREE-chain", "DDTREE-8", "DDTREE-24")]}))
    a = _args(server_args_cls, speculative_ddtree_budget="auto", speculative_ddtree_step_cost=str(table))
    assert a.speculative_ddtree_budget == 24 and a.speculative_num_draft_tokens == 25  # the verify width
    assert _args(server_args_cls, speculative_ddtree_budget="12").speculative_ddtree_budget == 12  # CLI strings


@pytest.mark.ddtree_cuda_path
def test_extra_buffer_test_switch_resolves_the_tiny_hybrid_to_extra_buffer(server_args_cls, monkeypatch):
    """testing/extra_buffer_arch.py: without the switch sglang leaves the tiny text-only hybrid's
    radix-cache strategy unresolved (no state tracking); with it, ``auto`` resolves to
    ``extra_buffer`` as for the real Qwen3.6 checkpoint (the GPU *-xb-radix cases rely on it)."""
    import sglang.srt.arg_groups.overrides as overrides
    import sglang.srt.server_args as sa

    from sglang_ddtree.testing.extra_buffer_arch import ENV, apply_extra_buffer_archs

    # Restored after the test; extra_buffer validation asks for a CUDA build, absent here.
    monkeypatch.setattr(overrides, "_MAMBA_RADIX_CACHE_ARCHS", overrides._MAMBA_RADIX_CACHE_ARCHS)
    monkeypatch.setattr(overrides, "_MAMBA_EXTRA_BUFFER_ARCHS", overrides._MAMBA_EXTRA_BUFFER_ARCHS)
    monkeypatch.setattr(sa, "is_cuda", lambda: True)
    monkeypatch.delenv(ENV, raising=False)
    assert apply_extra_buffer_archs() == []
    plain = _hybrid(server_args_cls, disable_overlap_schedule=False)
    assert plain.mamba_radix_cache_strategy == "auto" and not plain.enable_mamba_extra_buffer()
    monkeypatch.setenv(ENV, "Qwen3_5ForCausalLM")
    assert apply_extra_buffer_archs() == ["Qwen3_5ForCausalLM"]
    tracked = _hybrid(server_args_cls, disable_overlap_schedule=False, mamba_track_interval=16)
    assert tracked.mamba_radix_cache_strategy == "extra_buffer" and tracked.enable_mamba_extra_buffer()
    assert "Qwen3_5ForConditionalGeneration" in overrides._MAMBA_EXTRA_BUFFER_ARCHS  # kept


def test_pages_of_many_tokens_are_accepted(server_args_cls):
    assert _args(server_args_cls, page_size=16).page_size == 16


def test_a_default_backend_without_the_tree_mask_is_refused_when_the_worker_starts():
    """sglang resolves the default attention backend after our launch checks (fa3 on Hopper);
    the worker checks the resolved one and says it was sglang's choice."""
    import types

    from sglang_ddtree.server_args import check_attention_backends

    ok = types.SimpleNamespace(attention_backend="flashinfer", decode_attention_backend=None,
                               prefill_attention_backend=None)
    check_attention_backends(ok, defaulted=True)
    with pytest.raises(ValueError, match="got --attention-backend fa3 \\(sglang chose it"):
        check_attention_backends(types.SimpleNamespace(attention_backend="fa3"), defaulted=True)


@pytest.mark.parametrize("arch", ["DFlash2DraftModel", "DFlash2BeamDraftModel", "MiniMaxDFlash2DraftModel"])
def test_a_dflash2_drafter_is_refused_at_launch_naming_the_reason(server_args_cls, tmp_path, arch):
    """sglang 0.5.23's DFlash2 drafters pick each draft with a learned selector DDTREE does not
    use: refused at launch, naming the flag and the way to serve it (hard-coded names)."""
    import json
    import shutil

    drafter = tmp_path / "dflash2"
    shutil.copytree(tiny_models.model_path("dflash-llama"), drafter)
    cfg = json.loads((drafter / "config.json").read_text())
    cfg["architectures"] = [arch]
    (drafter / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=rf"--speculative-draft-model-path is a DFlash2 drafter \({arch}\).*"
                                         r"--speculative-algorithm DFLASH"):
        _args(server_args_cls, speculative_draft_model_path=str(drafter))
    # a copy declaring a DFlash drafter resolves (another folder: sglang caches configs by path)
    plain = tmp_path / "dflash"
    shutil.copytree(drafter, plain)
    cfg["architectures"] = ["DFlashDraftModel"]
    (plain / "config.json").write_text(json.dumps(cfg))
    assert _args(server_args_cls, speculative_draft_model_path=str(plain)).speculative_num_draft_tokens == 16


def test_resolved_arguments_are_read_from_one_view_per_resolved_record(server_args_cls):
    """``releases.resolved``: the record itself where construction resolves it (0.5.17); on 0.5.23
    one read-only view per record once its resolution finished (hooks ask per request)."""
    a = server_args_cls(model_path=str(tiny_models.model_path("llama")), device="cpu", dtype="float32",
                        speculative_algorithm="DDTREE", disable_overlap_schedule=True,
                        speculative_draft_model_path=str(tiny_models.model_path("dflash-llama")))
    if releases.CURRENT.resolves_in_post_init:
        assert releases.resolved(a) is a
        return
    a.resolve_once()
    view = releases.resolved(a)
    assert view is releases.resolved(a) and view.speculative_ddtree_budget == 15 and a.speculative_ddtree_budget is None
    with pytest.raises(AttributeError, match="read-only"):
        view.speculative_ddtree_budget = 8
