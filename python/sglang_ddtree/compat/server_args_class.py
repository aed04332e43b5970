"""The ``--speculative-ddtree-*`` flags on sglang's ``ServerArgs``.

sglang 0.5.17 has no seam for plugin flags: ``ServerArgs`` is a dataclass whose fields drive both
the CLI (``add_cli_args_from_dataclass``) and ``sglang.Engine(**kwargs)``. So:

- a class REPLACE of ``sglang.srt.server_args.ServerArgs`` by
  :class:`~sglang_ddtree.server_args.DDTreeServerArgs` (the registry also rebinds every module
  that imported the name), and of ``Engine.server_args_class`` (a class attribute the rebinding
  cannot reach);
- an AROUND hook on ``ServerArgs.__post_init__`` that records whether ``--mem-fraction-static``
  was given (for the verify memory reserve inside it; the mark is removed after, since
  ``vars(server_args)`` is what /server_info reports), and afterwards refuses DDTREE flags
  without ``--speculative-algorithm DDTREE``.
"""

from __future__ import annotations

from ..server_args import DDTreeServerArgs, ddtree_flags_set, is_ddtree
from ..spec_algo import FRACTION_GIVEN


def reject_ddtree_flags_without_ddtree(original, self, *args, **kwargs):
    object.__setattr__(self, FRACTION_GIVEN, self.mem_fraction_static is not None)
    try:
        result = original(self, *args, **kwargs)
    finally:
        self.__dict__.pop(FRACTION_GIVEN, None)
    if not is_ddtree(self):
        flags = ddtree_flags_set(self)
        if flags:
            raise ValueError(
                f"{', '.join(flags)} require(s) --speculative-algorithm DDTREE "
                f"(got --speculative-algorithm {self.speculative_algorithm})."
            )
    return result


def register_server_args_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register("sglang.srt.server_args.ServerArgs", DDTreeServerArgs, HookType.REPLACE)
    HookRegistry.register("sglang.srt.entrypoints.engine.Engine.server_args_class", DDTreeServerArgs,
                          HookType.REPLACE)
    HookRegistry.register("sglang.srt.server_args.ServerArgs.__post_init__", reject_ddtree_flags_without_ddtree,
                          HookType.AROUND)
