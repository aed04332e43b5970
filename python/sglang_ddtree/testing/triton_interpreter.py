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
