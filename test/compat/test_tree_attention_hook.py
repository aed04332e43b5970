"""compat/tree_attention.py: which of sglang's extend_attention_fwd calls go to the split kernel
(tree verifies it serves exactly; on the drafter's backend also the unmasked draft block, causal
or not, with its sliding window) and which stay with sglang's kernel, bound exactly as the triton
backend calls it; the hook only on a DDTREE server's backends with the flag not 'backend'; the
flag validated at launch."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch

from sglang_ddtree.compat import tree_attention as hook
from sglang_ddtree.server_args import split_kv_tree_attention


def _call(**over):
    """The arguments the triton backend passes for a tree verify (bs 2, window 5, 4 / 2 heads of 16)."""
    T, slots = 10, 40
    pos = dict(q_extend=torch.zeros(T, 4, 16), k_extend=torch.zeros(T, 2, 16), v_extend=torch.zeros(T, 2, 16),
               o_extend=torch.zeros(T, 4, 16), k_buffer=torch.zeros(slots, 2, 16), v_buffer=torch.zeros(slots, 2, 16),
               qo_indptr=torch.tensor([0, 5, 10]), kv_indptr=torch.tensor([0, 3, 7]), kv_indices=torch.arange(7),
               custom_mask=torch.ones(5 * 8 + 5 * 9, dtype=torch.bool), is_causal=True,
               mask_indptr=torch.tensor([0, 40, 85]), max_len_extend=5, k_scale=1.0, v_scale=1.0)
    kw = dict(sm_scale=0.25, logit_cap=0.0, sliding_window_size=-1, sinks=None, window_kv_offsets=None,
              xai_temperature_len=-1, page_size=1, score_mod=None, aux_tensors=None)
    for k, v in over.items():
        (pos if k in pos else kw)[k] = v
    return list(pos.values()), kw


def _upstream():
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd

    calls = []

    @functools.wraps(extend_attention_fwd)
    def recorder(*args, **kwargs):
        calls.append((args, kwargs))

    return recorder, calls


@pytest.fixture
def split_calls(monkeypatch):
    import sglang_ddtree.kernels.tree_attention as ta

    calls = []
    monkeypatch.setattr(ta, "tree_attention_fwd", lambda *a, **kw: calls.append((a, kw)))
    return calls


def test_a_tree_verify_goes_to_the_split_kernel(split_calls):
    upstream, up_calls = _upstream()
    args, kw = _call()
    hook.wrap(upstream)(*args, **kw)
    assert not up_calls and len(split_calls) == 1
    got, kw = split_calls[0]
    assert got[0] is args[0] and got[3] is args[3]          # q, o
    assert got[9] is args[9] and got[11] == 5 and got[12] == 0.25  # mask, max_q_len, scale
    assert kw == dict(causal=True, sliding_window=-1)


@pytest.mark.parametrize("causal,window", [(True, 2048), (False, -1), (True, -1)])
def test_a_draft_block_goes_to_the_split_kernel_on_the_drafter_only(split_calls, causal, window):
    """The DFlash drafter's block: no mask, causal (its sliding layers, with their window and
    window offsets) or not (its full layer)."""
    over = dict(custom_mask=None, mask_indptr=None, is_causal=causal, sliding_window_size=window,
                window_kv_offsets=torch.zeros(2, dtype=torch.int32) if window > 0 else None)
    upstream, up_calls = _upstream()
    args, kw = _call(**over)
    hook.wrap(upstream, drafter=True)(*args, **kw)
    assert not up_calls and len(split_calls) == 1
    assert split_calls[0][1] == dict(causal=causal, sliding_window=window)
    hook.wrap(upstream)(*args, **kw)                   # the target's backend: sglang's kernel
    assert len(up_calls) == 1 and len(split_calls) == 1


def test_a_drafter_prefill_stays_with_sglang(split_calls):
    upstream, up_calls = _upstream()
    args, kw = _call(custom_mask=None, mask_indptr=None, max_len_extend=hook.DRAFT_MAX_WINDOW + 1)
    hook.wrap(upstream, drafter=True)(*args, **kw)
    assert not split_calls and len(up_calls) == 1


@pytest.mark.parametrize("over", [
    dict(custom_mask=None), dict(is_causal=False), dict(logit_cap=30.0), dict(sliding_window_size=128),
    dict(window_kv_offsets=torch.zeros(2, dtype=torch.int32)),
    dict(sinks=torch.zeros(4)), dict(k_scale=0.5), dict(score_mod=object()), dict(xai_temperature_len=8),
    dict(k_buffer=torch.zeros(5, 8, 2, 16)),          # a paged 4-D pool
    dict(q_extend=torch.zeros(10, 4, 24)),            # a head dim the kernel does not take
    dict(q_extend=torch.zeros(10, 3, 16)),            # q heads not a multiple of the kv heads
    dict(k_buffer=torch.zeros(40, 2, 16, dtype=torch.float16)),  # pool dtype unlike q's
])
def test_anything_else_stays_with_sglang_unchanged(split_calls, over):
    upstream, up_calls = _upstream()
    args, kw = _call(**over)
    hook.wrap(upstream)(*args, **kw)
    assert not split_calls and len(up_calls) == 1
    assert up_calls[0][0] == tuple(args) and up_calls[0][1] == kw


def _backend_init(server_args, draft=False):
    backend = SimpleNamespace(extend_attention_fwd=_upstream()[0])
    runner = SimpleNamespace(is_draft_worker=draft, server_args=server_args)
    hook._after_init(None, backend, runner)
    return getattr(backend.extend_attention_fwd, "ddtree_split_kv", False)


def test_the_hook_wraps_only_a_ddtree_target_with_the_kernel_chosen():
    ddtree = SimpleNamespace(speculative_algorithm="DDTREE", speculative_ddtree_tree_attention="auto")
    assert _backend_init(ddtree)
    assert _backend_init(ddtree, draft=True)
    assert not _backend_init(SimpleNamespace(speculative_algorithm="DFLASH"))
    assert not _backend_init(SimpleNamespace(speculative_algorithm="DFLASH"), draft=True)
    assert not _backend_init(SimpleNamespace(speculative_algorithm="DDTREE", speculative_ddtree_tree_attention="backend"))
    assert split_kv_tree_attention(SimpleNamespace(speculative_algorithm="DDTREE", speculative_ddtree_tree_attention="split-kv"))
