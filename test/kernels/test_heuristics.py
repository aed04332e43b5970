"""The launch choices of the tree kernels (``kernels/gdn_tree/heuristics.py``): each rule of the
table at the shapes it was measured on, with the H200's (and an sm_120 GPU's) properties stood in;
no kernel runs.
"""

from __future__ import annotations

import types

import pytest
import torch

from sglang_ddtree.kernels.gdn_tree import heuristics as kern

H200 = types.SimpleNamespace(multi_processor_count=132, shared_memory_per_block_optin=232448)


def test_every_option_has_a_value_for_any_case():
    for option in kern.OPTIONS:
        kern.choose(option, kern.Case())
    with pytest.raises(KeyError, match="no rule"):
        kern.choose("block_t", kern.Case())


def test_pdl_default_rule(monkeypatch):
    """``pdl=None`` launches the apply pass as a dependent only for "twostage" on a CUDA GPU of
    compute capability 9.0+ (never in the interpreter) and apply grids of at most three
    programs per SM."""
    class Props:
        multi_processor_count = 132

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *d: Props())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (9, 0))
    assert kern.apply_as_dependent("twostage", 396, "cuda")
    assert not kern.apply_as_dependent("twostage", 397, "cuda")
    assert not kern.apply_as_dependent("fused", 96, "cuda")
    assert not kern.apply_as_dependent("twostage", 96, "cpu")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (8, 9))
    assert not kern.apply_as_dependent("twostage", 96, "cuda")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *d: (9, 0))
    assert not kern.apply_as_dependent("twostage", 96, "cuda")


def test_block_chunk():
    assert [kern.block_chunk(n) for n in (1, 9, 17, 18, 33, 65, 66, 257)] == [16, 16, 16, 32, 32, 64, 64, 64]


def test_auto_impl_follows_the_h200_timings(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: H200)
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


def test_register_limit_rule(monkeypatch):
    """168 registers for the twostage kernels past 33 nodes with 32-wide tiles from 4 programs
    (of 64-wide tiles) per SM — where the H200 timed it faster (bs 16 / 64) — else none (bs 1 /
    4, 33-node trees, 64-wide tiles, other impls, the interpreter)."""
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: H200)
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


def test_pairs_formed_where_used():
    """"twostage" past 33 nodes (its prep's own pair products timed faster than the pair kernel
    at 65 nodes, slower at 17 and 33: H200), and "fused" on a tree of one node chunk."""
    assert kern.prep_forms_pairs("twostage", 65) and kern.prep_forms_pairs("twostage", 34)
    assert not kern.prep_forms_pairs("twostage", 33) and not kern.prep_forms_pairs("twostage", 17)
    assert not kern.prep_forms_pairs("fused", 65, 5) and not kern.prep_forms_pairs("split", 129, 9)
    # A tree of one node chunk (budget 15, the chain): the fused walk forms them (H100: 0.33 vs
    # 0.42 ms over 48 layers at one request, 7.78 vs 8.89 at 64; results/2026-12-06b/call5).
    assert kern.prep_forms_pairs("fused", 16, 1) and kern.prep_forms_pairs("fused", 9, 1)
    assert not kern.prep_forms_pairs("fused", 17, 2) and not kern.prep_forms_pairs("split", 16, 1)


def test_conv_tiles_over_the_flat_batch_for_more_than_one_tree():
    assert not kern.conv_flat(1) and kern.conv_flat(2) and kern.conv_flat(64)
