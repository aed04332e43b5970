"""Tree causal conv and conv commit (``kernels/gdn_tree/conv.py``) against the float64
path-by-path conv reference and the plain conv commit. On CPU the kernels run in the Triton
interpreter (see ``gdn_cases``).
"""

from __future__ import annotations

import pytest
import torch

from gdn_cases import DEV, interpreter_test, kernels_here, rel, trees
from sglang_ddtree.kernels.gdn_tree import naive, tree_conv, tree_conv_commit

test_in_triton_interpreter = interpreter_test(__file__)


@pytest.mark.parametrize("flat", [False, True])
@kernels_here
def test_bf16_tree_conv_rounds_products_as_sglang_does(flat):
    """bf16 inputs: each tap's product is rounded to bf16 before the fp32 sum (sglang's
    causal_conv1d_update multiplies its unwidened bf16 loads, and the plain decode uses it), so
    the outputs equal the float64 reference with rounded products, bf16-rounded, in all but a
    few elements (fp32 vs float64 summation), each at most one ulp off. The same reference with
    exact products differs in far more elements: the check can tell the two roundings apart."""
    C, W, n = 64, 4, 23
    batch = trees(n)
    bs = len(batch)
    bf = torch.bfloat16
    x = torch.randn(bs * n, C).to(bf)
    weight = (torch.randn(C, W) * 0.5).to(bf)
    pool = torch.randn(5, C, W - 1).to(bf)  # window-fastest, as sglang 0.5.17 allocates it
    slots = torch.tensor([2, 4, 0, 3])
    parents = torch.stack([t[0] for t in batch])
    out = tree_conv(x.to(DEV), weight.to(DEV), None, pool.to(DEV), slots.to(DEV), parents.to(DEV),
                    flat=flat).cpu().float()

    def ref(round_products):
        return torch.cat([naive.conv_tree_path_reference(x[r * n:(r + 1) * n], weight, None, pool[slots[r]],
                                                         parents[r], round_products=round_products)
                          for r in range(bs)]).to(bf).float()

    want, exact = ref(True), ref(False)
    assert not torch.isnan(out).any()
    off = (out != want).float().mean().item()
    assert off <= 2e-3, off
    assert ((out - want).abs() <= torch.finfo(bf).eps * want.abs() * 1.01).all()
    assert (exact != want).float().mean().item() > 10 * max(off, 1e-3)


@pytest.mark.parametrize("n,flat", [(16, False), (37, False), (37, True), (17, True)])
@kernels_here
def test_tree_conv_and_commit_match_path_reference(n, flat):
    C, W = 48, 4
    batch = trees(n)
    bs = len(batch)
    x = torch.randn(bs * n, C)
    weight = torch.randn(C, W)
    bias = torch.randn(C)
    # sglang's conv pool is channel-fastest: allocate [slots, W-1, C] and view it as [slots, C, W-1].
    pool = torch.randn(5, W - 1, C).transpose(1, 2)
    slots = torch.tensor([2, 4, 0, 3])
    parents = torch.stack([t[0] for t in batch])
    ref = torch.cat([naive.conv_tree_path_reference(x[r * n:(r + 1) * n], weight, bias, pool[slots[r]], parents[r])
                     for r in range(bs)])
    out = tree_conv(x.to(DEV), weight.to(DEV), bias.to(DEV), pool.to(DEV), slots.to(DEV), parents.to(DEV), flat=flat)
    assert rel(out, ref) < 1e-5
    out_nb = tree_conv(x.to(DEV), weight.to(DEV), None, pool.to(DEV), slots.to(DEV), parents.to(DEV),
                       activation=False, flat=flat)
    ref_nb = torch.cat([naive.conv_tree_path_reference(x[r * n:(r + 1) * n], weight, None, pool[slots[r]], parents[r],
                                                       activation=False)
                        for r in range(bs)])
    assert rel(out_nb, ref_nb) < 1e-5
    # Rows of a wider projection (strided, as sglang's split of its qkv projection), with the
    # input copied out by the same launch: the same outputs, and an exact copy.
    wide = torch.randn(bs * n, C + 20)
    wide[:, 7:7 + C] = x
    copy = torch.full((bs * n, C), float("nan"), device=DEV)
    out_s = tree_conv(wide.to(DEV)[:, 7:7 + C], weight.to(DEV), bias.to(DEV), pool.to(DEV), slots.to(DEV),
                      parents.to(DEV), flat=flat, x_out=copy)
    assert torch.equal(out_s, out) and torch.equal(copy.cpu(), x)
    with pytest.raises(ValueError, match="x_out"):
        tree_conv(x.to(DEV), weight.to(DEV), bias.to(DEV), pool.to(DEV), slots.to(DEV), parents.to(DEV),
                  x_out=copy[:, :4])
    # Split into a GDN layer's q | k | v: three contiguous tensors holding the single output's
    # column ranges exactly (16 and 8 channels: the ranges cut through a 64-channel tile).
    parts = tree_conv(x.to(DEV), weight.to(DEV), bias.to(DEV), pool.to(DEV), slots.to(DEV), parents.to(DEV),
                      flat=flat, split=(16, 8))
    assert [tuple(t.shape) for t in parts] == [(bs * n, 16), (bs * n, 8), (bs * n, C - 24)]
    assert all(t.is_contiguous() for t in parts)
    assert torch.equal(torch.cat(parts, dim=1), out)
    with pytest.raises(ValueError, match="split"):
        tree_conv(x.to(DEV), weight.to(DEV), bias.to(DEV), pool.to(DEV), slots.to(DEV), parents.to(DEV),
                  split=(40, 20))

    P = 16
    accepted = torch.full((bs, P), -1, dtype=torch.int64)
    accept_len = torch.zeros(bs, dtype=torch.int64)
    want = {}
    for r in range(bs):
        node = [n - 1, 0, n // 2, 1][r]
        path = naive.path_of(parents[r], node)[:P]
        accepted[r, : len(path)] = torch.tensor(path)
        accept_len[r] = len(path) - 1
        want[r] = naive.conv_commit_state(x[r * n:(r + 1) * n], pool[slots[r]], torch.tensor(path))
    st = pool.clone().to(DEV)
    tree_conv_commit(x.to(DEV), st, slots.to(DEV), accepted.to(DEV), accept_len.to(DEV))
    st = st.cpu()
    for r in range(bs):
        assert torch.equal(st[slots[r]], want[r]), r
    assert torch.equal(st[1], pool[1])  # a slot no request owns is untouched


@kernels_here
def test_padded_rows_never_read_before_the_pool():
    """A CUDA-graph replay pads the batch with rows whose slot is sglang's PAD_SLOT_ID (-1). The
    tree conv must not read the memory before the pool for them (on the H200 an illegal address
    at 64 requests): that memory is NaN here, so a padded row that read it would come out NaN.
    Real rows are unchanged by the padded one. (The verify's case: ``test_verify.py``.)"""
    n = 17
    parents = torch.stack([t[0] for t in trees(n)[:2]]).to(DEV)
    padded = torch.tensor([2, -1], device=DEV)
    C, W = 8, 4
    x = torch.randn(2 * n, C, device=DEV)
    weight = torch.randn(C, W, device=DEV)
    pool = torch.full((4, C, W - 1), float("nan"), device=DEV)
    pool[1:] = torch.randn(3, C, W - 1, device=DEV)
    for flat in (False, True):
        out = tree_conv(x, weight, None, pool[1:], padded, parents, flat=flat)
        ref = tree_conv(x, weight, None, pool[1:], torch.tensor([2, 0], device=DEV), parents, flat=flat)
        assert not torch.isnan(out).any() and torch.equal(out[:n], ref[:n])
