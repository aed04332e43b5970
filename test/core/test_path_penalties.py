"""core/path_penalties.py against a per-node plain reference: each node's logits penalised as
sglang penalises one decode step whose output so far is the committed output followed by the
node's path (frequency sums built one fp32 addition per token in output order, presence,
min_new_tokens' stop tokens, repetition scaling), compared exactly in fp32 on random trees with
repeated tokens (a small vocabulary), mixed penalties per request and neutral ones."""

from __future__ import annotations

import pytest
import torch

from sglang_ddtree.core.path_penalties import apply_path_penalties, path_multiplicity


def _tree(W, g):
    parent = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, W)]
    anc = torch.zeros(W, W, dtype=torch.bool)
    depth = torch.zeros(W, dtype=torch.long)
    for i in range(W):
        j = i
        while j >= 0:
            anc[i, j] = True
            j = parent[j]
        depth[i] = int(anc[i].sum()) - 1
    return anc, depth


def _reference_row(raw, outputs, f, p, r, min_new, stop):
    """One decode step of sglang without speculation on ``raw [V]`` with ``outputs`` so far."""
    V = raw.shape[0]
    cum = torch.zeros(V)
    present = torch.zeros(V, dtype=torch.bool)
    for t in outputs:  # one cumulate per output token (scatter_add of the penalty)
        cum[t] = cum[t] + f
        present[t] = True
    x = raw.clone()
    x = x - cum
    x = x - torch.where(present, torch.tensor(p), torch.tensor(0.0))
    if len(outputs) < min_new:
        x = x.masked_fill(stop, float("-inf"))
    s = torch.where(present, torch.tensor(r), torch.tensor(1.0))
    return torch.where(x > 0, x / s, x * s)


@pytest.mark.parametrize("seed", range(6))
def test_every_node_equals_a_plain_decode_step(seed):
    g = torch.Generator().manual_seed(seed)
    bs, W, V = 4, 12, 9
    trees = [_tree(W, g) for _ in range(bs)]
    anc = torch.stack([a for a, _ in trees])
    depth = torch.stack([d for _, d in trees])
    tokens = torch.randint(0, V, (bs, W), generator=g)
    committed = [torch.randint(0, V, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g).tolist()
                 for _ in range(bs)]
    for b in range(bs):
        committed[b][-1] = int(tokens[b, 0])  # the root is the last committed token
    freq = torch.tensor([0.3, 0.0, 0.7, 0.1])
    pres = torch.tensor([0.0, 0.45, 0.2, 0.0])
    rep = torch.tensor([1.0, 1.3, 1.0, 1.7])
    min_new = torch.tensor([0, 7, 3, 0])
    stop = torch.zeros(bs, V, dtype=torch.bool)
    stop[:, 2] = True
    stop[1, 5] = True
    raw = torch.randn(bs, W, V, generator=g) * 3

    cum = torch.zeros(bs, V)
    present = torch.zeros(bs, V, dtype=torch.bool)
    for b in range(bs):
        for t in committed[b]:
            cum[b, t] = cum[b, t] + freq[b]
            present[b, t] = True
    out_len = torch.tensor([len(c) for c in committed])
    got = raw.clone()
    apply_path_penalties(got, cum, present, out_len, tokens, anc, depth, freq, pres, rep, min_new, stop)

    for b in range(bs):
        for i in range(W):
            path = [j for j in range(1, W) if anc[b, i, j]]  # root excluded, in depth order
            outs = committed[b] + [int(tokens[b, j]) for j in sorted(path, key=lambda j: int(depth[b, j]))]
            want = _reference_row(raw[b, i], outs, float(freq[b]), float(pres[b]), float(rep[b]), int(min_new[b]),
                                  stop[b])
            assert torch.equal(got[b, i], want), (seed, b, i, (got[b, i] - want).abs().max())


def test_multiplicity_counts_path_tokens_below_the_root():
    #      0 (tok 4)
    #     / \\
    #    1   2 (tok 4)      1: tok 7
    #    |
    #    3 (tok 7)
    tokens = torch.tensor([[4, 7, 4, 7]])
    anc = torch.tensor([[[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]], dtype=torch.bool)
    m = path_multiplicity(tokens, anc)[0]
    assert m[0].tolist() == [0, 0, 0, 0]        # the root's path below the root is empty
    assert m[3].tolist() == [0, 2, 0, 2]        # node 3: tokens 7, 7 (the root's 4 is not counted)
    assert m[2].tolist() == [1, 0, 1, 0]        # node 2: its own 4


def test_penalty_state_counts_committed_tokens_in_order():
    """engine/penalty_state.py: admission resets a slot and counts the first token unless the
    request is still being prefilled in chunks; a step's commit counts its first ``lens`` tokens
    with one fp32 addition each, as sglang's per-step cumulation would."""
    import types

    from sglang.srt.sampling.sampling_params import SamplingParams

    from sglang_ddtree.engine.penalty_state import PenaltyState, penalised

    def req(chunked=0, output_ids=(), **sp):
        tok = types.SimpleNamespace(eos_token_id=2, additional_stop_token_ids=None)
        return types.SimpleNamespace(sampling_params=SamplingParams(**sp), tokenizer=tok, is_chunked=chunked,
                                     output_ids=list(output_ids))

    a, b = req(frequency_penalty=0.1, stop_token_ids=[5]), req(chunked=1, repetition_penalty=1.5)
    assert penalised(a) and penalised(b) and not penalised(req()) and penalised(req(min_new_tokens=3))
    st = PenaltyState(slots=4, vocab=8, device="cpu")
    st.cum_freq[3, 1] = 9.0  # a previous request's leftovers in slot 3
    st.admit([a, b], torch.tensor([3, 1]), torch.tensor([6, 4]))
    assert st.out_len.tolist() == [0, 0, 0, 1] and st.cum_freq[3].tolist() == [0, 0, 0, 0, 0, 0, st.freq[3].item(), 0]
    assert st.present[1].sum() == 0 and st.stop[3].nonzero().flatten().tolist() == [2, 5]
    assert float(st.rep[1]) == 1.5 and float(st.freq[3]) == pytest.approx(0.1)
    st.commit(torch.tensor([3, 1]), torch.tensor([[6, 6, 7], [1, 3, 3]]), torch.tensor([3, 1]))
    want = st.freq[3].clone()  # the first token (admission), then the two 6s committed
    want = want + st.freq[3]
    want = want + st.freq[3]
    assert st.cum_freq[3, 6] == want and st.cum_freq[3, 7] == st.freq[3]  # three 6s: one add each
    assert st.out_len.tolist() == [0, 1, 0, 4] and st.present[1].nonzero().flatten().tolist() == [1]
    # A request prefilled again (after a retraction) counts the output it already has first.
    c = req(output_ids=[4, 4], frequency_penalty=0.5)
    st.admit([c], torch.tensor([0]), torch.tensor([4]))
    assert st.out_len[0] == 3 and float(st.cum_freq[0, 4]) == 1.5 and bool(st.present[0, 4])
