"""Running Triton kernels in Triton's CPU interpreter (``TRITON_INTERPRET=1``), for kernel tests
and benchmark smoke modes."""

from __future__ import annotations


def patch_scalar_index() -> None:
    """In Triton's interpreter a scalar argument or a scalar loaded from memory is a one-element
    array, which its ``__index__`` (used by ``range`` over a runtime loop bound) cannot convert;
    compiled Triton has no such limit. Call in an interpreter process only, before a kernel runs."""
    import numpy as np
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patch(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch


class OutOfBounds(AssertionError):
    """A kernel's load or store reached memory outside every tensor argument of its launch."""


def patch_bounds_check() -> None:
    """In Triton's interpreter, check every load and store: each lane the mask keeps must read or
    write bytes inside the storage of one of the launch's tensor arguments (or of a tensor an
    address-table argument names in its ``points_into`` attribute), else
    :class:`OutOfBounds` (naming the kernel, the program and the first addresses) ends the launch.
    On a GPU such an access may read a neighbour's memory silently or fault the whole context
    ("an illegal memory access"). Call in an interpreter process only, before a kernel runs."""
    import numpy as np
    import torch
    from triton.runtime import interpreter as itp

    if getattr(itp.GridExecutor, "_ddtree_bounds_checked", False):
        return
    itp.GridExecutor._ddtree_bounds_checked = True
    state = {"lo": np.zeros(0, np.uint64), "hi": np.zeros(0, np.uint64), "kernel": "?"}
    init_args, load, store = itp.GridExecutor._init_args_hst, itp.InterpreterBuilder.create_masked_load, \
        itp.InterpreterBuilder.create_masked_store

    def tensors(args):  # the tensors among a launch's arguments, tuples opened
        for a in args:
            if isinstance(a, torch.Tensor):
                yield a
            elif isinstance(a, tuple):
                yield from tensors(a)

    def launch_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        # (``points_into`` is read from the caller's tensors: the host copies do not carry it)
        pointed = [p for t in tensors(list(args_dev) + list(kwargs.values())) for p in getattr(t, "points_into", ())]
        ranges = sorted({(st.data_ptr(), st.data_ptr() + st.nbytes())
                         for st in (t.untyped_storage() for t in [*tensors([*args_hst, *kwargs_hst.values()]), *pointed])})
        state["lo"] = np.array([r[0] for r in ranges], dtype=np.uint64)
        state["hi"] = np.array([r[1] for r in ranges], dtype=np.uint64)
        state["kernel"] = getattr(self.fn, "__name__", repr(self.fn))
        return args_hst, kwargs_hst

    def check(builder, ptrs, mask, nbytes, what):
        p = np.asarray(ptrs)
        p = p.astype(np.uint64).ravel()[np.broadcast_to(np.asarray(mask).astype(bool), p.shape).ravel()]
        if p.size == 0:
            return
        lo, hi = state["lo"], state["hi"]
        i = np.searchsorted(lo, p, side="right") - 1  # the last storage starting at or before p
        ok = (i >= 0) & (p + np.uint64(nbytes) <= hi[np.maximum(i, 0)])
        if not ok.all():
            bad = p[~ok]
            raise OutOfBounds(f"{state['kernel']}: {what} of {bad.size} lane(s) outside its tensor arguments at "
                              f"program {tuple(builder.grid_idx)}, first {[hex(int(b)) for b in bad[:3]]}; "
                              f"storages {[(hex(int(a)), int(b - a)) for a, b in zip(lo, hi)]}")

    def checked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        check(self, ptrs.data, mask.data, np.dtype(itp._get_np_dtype(ptrs.get_element_ty())).itemsize, "load")
        return load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

    def checked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        check(self, ptrs.data, mask.data, value.data.dtype.itemsize, "store")
        return store(self, ptrs, value, mask, cache_modifier, eviction_policy)

    itp.GridExecutor._init_args_hst = launch_args
    itp.InterpreterBuilder.create_masked_load = checked_load
    itp.InterpreterBuilder.create_masked_store = checked_store
