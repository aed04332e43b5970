"""The ``--speculative-ddtree-*`` flags on sglang's ``ServerArgs``.

sglang has no seam for plugin flags: ``ServerArgs``'s fields drive both the CLI
(``add_cli_args_from_dataclass``) and ``sglang.Engine(**kwargs)``. So a class REPLACE of
``sglang.srt.server_args.ServerArgs`` by :class:`~sglang_ddtree.server_args.DDTreeServerArgs` (the
registry also rebinds every module that imported the name), and of ``Engine.server_args_class`` (a
class attribute the rebinding cannot reach). The refusal of DDTREE flags without
``--speculative-algorithm DDTREE`` is ``DDTreeServerArgs.__post_init__`` itself, not a hook: on
releases whose ``ServerArgs`` is a msgspec Struct the Struct reads ``__post_init__`` once, when
the class is created, so a hook patched onto it later would never run.
"""

from __future__ import annotations

from ..server_args import DDTreeServerArgs


def register_server_args_hooks() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register("sglang.srt.server_args.ServerArgs", DDTreeServerArgs, HookType.REPLACE)
    HookRegistry.register("sglang.srt.entrypoints.engine.Engine.server_args_class", DDTreeServerArgs,
                          HookType.REPLACE)
