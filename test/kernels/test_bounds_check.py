"""testing/triton_interpreter.patch_bounds_check, which the interpreter runs of every kernel test
use: a load or store outside the launch's tensor arguments ends the launch; masked-off lanes and
views inside a larger storage pass."""

from __future__ import annotations

import pytest
import torch
from gdn_cases import HAS_CUDA, IN_CHILD, interpreter_test

test_in_triton_interpreter = interpreter_test(__file__)

needs_child = pytest.mark.skipif(HAS_CUDA or not IN_CHILD, reason="the interpreter child process only")

if IN_CHILD and not HAS_CUDA:
    import triton
    import triton.language as tl

    @triton.jit
    def _copy(src, dst, n, shift, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(dst + i, tl.load(src + i + shift, mask=i < n, other=0.0), mask=i < n)


@needs_child
def test_in_bounds_and_masked_lanes_pass():
    src, dst = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    _copy[(1,)](src, dst, 8, 0, BLOCK=16)  # lanes 8..15 masked off
    assert torch.equal(dst, src)
    big = torch.arange(16, dtype=torch.float32)
    _copy[(1,)](big[:8], dst, 8, 4, BLOCK=8)  # past the view, inside its storage
    assert torch.equal(dst, big[4:12])


@needs_child
def test_a_read_past_the_storage_ends_the_launch():
    from triton.runtime.interpreter import InterpreterError

    src, dst = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    with pytest.raises(InterpreterError, match="_copy: load of 1 lane"):
        _copy[(1,)](src, dst, 8, 1, BLOCK=8)
    with pytest.raises(InterpreterError, match="_copy: load of 8 lane"):
        _copy[(1,)](src, dst, 8, -100, BLOCK=8)


@needs_child
def test_an_address_table_names_what_it_points_into():
    """A kernel reading through int64 addresses (as the conv commit reads the model's weights)
    passes where the table's ``points_into`` names the tensors, and is stopped where it does not."""
    from triton.runtime.interpreter import InterpreterError

    @triton.jit
    def _gather(tab, dst, BLOCK: tl.constexpr):
        src = tl.load(tab).to(tl.pointer_type(tl.float32))
        i = tl.arange(0, BLOCK)
        tl.store(dst + i, tl.load(src + i))

    src, dst = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    tab = torch.tensor([src.data_ptr()], dtype=torch.int64)
    with pytest.raises(InterpreterError, match="_gather: load of 8 lane"):
        _gather[(1,)](tab, dst, BLOCK=8)
    tab.points_into = (src,)
    _gather[(1,)](tab, dst, BLOCK=8)
    assert torch.equal(dst, src)


@needs_child
def test_lanes_masked_off_by_a_scalar_term_are_not_checked():
    """A mask combining a lane vector with a scalar condition reaches the check as integers: lanes
    it masks off, far outside every tensor, pass (the conv commit's taps before the root)."""
    @triton.jit
    def _far(src, dst, n, shift, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        v = tl.load(src + i + shift, mask=(i < n) & (shift < 0), other=0.0)
        tl.store(dst + i, v, mask=i < n)

    src, dst = torch.arange(8, dtype=torch.float32), torch.ones(8)
    _far[(1,)](src, dst, 8, 1 << 20, BLOCK=8)
    assert torch.equal(dst, torch.zeros(8))
