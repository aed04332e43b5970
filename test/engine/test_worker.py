"""worker.py wiring that needs no engine: the hybrid target's GDN mode is known only once sglang's
attention backends exist (DFLASH decides there whether the target has linear-attention state to
commit: reading it earlier served every hybrid step as attention-only); the oracle-rate refusal on
hybrid targets; budget auto's verify widths."""

from __future__ import annotations

import types

import pytest

from sglang_ddtree.server_args import GDN_SNAPSHOT, GDN_WY
from sglang_ddtree.worker import DDTreeWorker


def _worker(monkeypatch, hybrid: bool, mode=GDN_WY, oracle_rate=0.0, backend="triton"):
    from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2

    def base_init_backends(self):  # what sglang's DFLASH worker decides there
        self._need_mamba_verify_commit = hybrid

    monkeypatch.setattr(DFlashWorkerV2, "init_attention_backends", base_init_backends)
    w = object.__new__(DDTreeWorker)  # no engine: only the attributes the method reads
    w._need_mamba_verify_commit = False  # sglang's value before its backends exist
    w._gdn_mode, w.gdn, w.oracle_rate = mode, None, oracle_rate
    args = types.SimpleNamespace(attention_backend=backend, decode_attention_backend=None,
                                 prefill_attention_backend=None)
    w._target_worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(attn_backend=None, server_args=args))
    return w


def test_a_resolved_backend_without_the_tree_mask_stops_the_worker(monkeypatch):
    """sglang picks the default attention backend after the launch checks (fa3 on Hopper): the
    worker refuses it before the backends are made."""
    with pytest.raises(ValueError, match="got --attention-backend fa3 \\(sglang chose it"):
        _worker(monkeypatch, hybrid=False, backend="fa3").init_attention_backends()


@pytest.mark.parametrize("hybrid,mode,want", [(True, GDN_WY, GDN_WY), (True, GDN_SNAPSHOT, GDN_SNAPSHOT),
                                              (False, GDN_WY, None)])
def test_gdn_mode_is_set_once_the_attention_backends_exist(monkeypatch, hybrid, mode, want):
    w = _worker(monkeypatch, hybrid, mode)
    assert w.gdn is None
    w.init_attention_backends()
    assert w.gdn == want


def test_oracle_rate_is_refused_on_hybrid_targets(monkeypatch):
    w = _worker(monkeypatch, hybrid=True, oracle_rate=0.5)
    with pytest.raises(NotImplementedError, match="--speculative-ddtree-oracle-rate"):
        w.init_attention_backends()
    _worker(monkeypatch, hybrid=False, oracle_rate=0.5).init_attention_backends()  # attention only: served


def test_worker_policy_caps_cover_every_width_the_policy_can_pick():
    from sglang_ddtree.core.budget_policy import BudgetPolicy, StepCostTable

    rows = [dict(config=c, concurrency=1, ms_per_step=1.0) for c in ("DDTREE-8", "DDTREE-32", "DDTREE-chain")]
    w = object.__new__(DDTreeWorker)
    w.block_size, w.max_depth = 16, 15
    w.policy = BudgetPolicy(StepCostTable.from_rows(rows))
    # Budget 8 and the 15-deep chain both verify in one drafter block (16 positions); 32: 33.
    assert sorted(w.policy_caps()) == [16, 33]
    w.policy = None
    assert w.policy_caps() == {}


def test_drafter_host_lengths_never_read_the_device_when_the_host_knows_a_bound():
    """Under overlap scheduling the batch has no host lengths: the drafter's block forward takes
    DFLASH's reservation (host-known) instead of summing the device lengths (a host sync each
    step). prefix_lens on the meta device: any read of it raises."""
    import torch

    meta = torch.empty(2, dtype=torch.int64, device="meta")
    known = types.SimpleNamespace(seq_lens_cpu=torch.tensor([10, 20]))
    lens, total = DDTreeWorker._draft_host_lens(known, None, meta, block=4)
    assert lens.tolist() == [14, 24] and total == 38
    overlap = types.SimpleNamespace(seq_lens_cpu=None)
    reserved = types.SimpleNamespace(reserved_seq_lens_cpu=torch.tensor([50, 60]), reserved_seq_lens_sum=110)
    lens, total = DDTreeWorker._draft_host_lens(overlap, reserved, meta, block=4)
    assert lens.tolist() == [50, 60] and total == 110
    # Neither: the exact sum from the device (the one case that synchronises).
    lens, total = DDTreeWorker._draft_host_lens(overlap, types.SimpleNamespace(reserved_seq_lens_cpu=None),
                                                torch.tensor([10, 20]), block=4)
    assert lens is None and total == 38


def test_a_pin_file_sets_each_steps_choice(tmp_path):
    """SGLANG_DDTREE_BENCH_PIN: each step verifies what the file names (the chain at the chain's
    width, a budget at its width), the policy's own choice where it says auto, is empty or absent,
    re-read when it changes; a word that is neither raises naming the file and the table's budgets."""
    import os

    from sglang_ddtree.core.budget_choice import CHAIN
    from sglang_ddtree.core.budget_policy import BudgetPolicy, PinnedChoice, StepCostTable

    rows = [dict(config=c, concurrency=1, ms_per_step=ms) for c, ms in
            (("DDTREE-8", 1.0), ("DDTREE-32", 1.0), ("DDTREE-chain", 1.0))]
    w = object.__new__(DDTreeWorker)
    w.block_size, w.max_depth = 16, 15
    w.policy = BudgetPolicy(StepCostTable.from_rows(rows))
    pin = tmp_path / "pin"
    w._pin = PinnedChoice(str(pin), w.policy.budgets, w.policy.chain)
    steps_before = w.policy.steps
    assert w._step_shape(1)[::4] == (32, False)  # absent: the policy (no estimate yet: the largest)
    assert w.policy.steps == steps_before + 1

    def pin_to(word, bump):
        pin.write_text(word)
        st = pin.stat()
        os.utime(pin, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 10**9))  # (a coarse clock)

    pin_to("chain", 1)
    assert w._step_shape(1) == (CHAIN, 15, 16, 1, True)
    pin_to("8\n", 2)
    assert w._step_shape(1) == (8, 8, 16, None, True)
    assert w.policy.steps == steps_before + 1  # pinned steps never consult the policy
    pin_to("auto", 3)
    assert w._step_shape(1)[::4] == (32, False)
    pin_to("16", 4)
    with pytest.raises(ValueError, match=r"pin.*'16'.*\[8, 32\]"):
        w._step_shape(1)
    no_chain = PinnedChoice(str(pin), (8,), chain=False)
    with pytest.raises(ValueError, match="no chain row"):
        no_chain.parse("chain")
    assert no_chain.parse("") is None and no_chain.parse(" 8 ") == 8
