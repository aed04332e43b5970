"""The sglang releases sglang-ddtree serves on, and the facts about them that its code branches on.

``SUPPORTED_RELEASES`` are the exact sglang versions the package runs on; ``MEASURED_RELEASE`` is
the one the GPU results, the Docker image and the offline bundle are built on. Importing this
module under any other sglang version raises :class:`UnsupportedSglangRelease`, naming the
supported releases; the plugin entry point and every module that subclasses or hooks sglang
import it first, so an unsupported sglang is refused before any hook is registered.

What differs between the releases is declared once, in ``TRAITS`` (one :class:`ReleaseTraits` per
supported release); ``CURRENT`` is the installed release's entry. Code elsewhere reads a trait or
calls a helper of this module, never compares version strings. ``docs/sglang-releases.md`` lists
every seam and its state on each release.
"""

from __future__ import annotations

import dataclasses
from typing import Tuple

SUPPORTED_RELEASES: Tuple[str, ...] = ("0.5.17", "0.5.23")
MEASURED_RELEASE = "0.5.17"


class UnsupportedSglangRelease(ImportError):
    """The installed sglang is not one of ``SUPPORTED_RELEASES``."""


@dataclasses.dataclass(frozen=True)
class ReleaseTraits:
    """What one sglang release does differently at a seam the package depends on.

    ``server_args_record``: how ``sglang.srt.server_args.ServerArgs`` declares its fields:
    ``"dataclass"`` (a ``dataclasses.dataclass``) or ``"struct"`` (a ``msgspec.Struct`` built by
    ``msgspec.defstruct``, whose subclasses take annotated class attributes as fields when the
    class is created, and which reads ``__post_init__`` only then: a later patch of it is ignored).

    ``resolves_in_post_init``: whether ``ServerArgs.__post_init__`` resolves the arguments
    (defaults, the speculative algorithm's handling) by writing the record; otherwise the record
    keeps the operator's input and sglang resolves it later (``ServerArgs.resolve_once``),
    declaring each decision instead of writing the field.

    ``spec_logprobs``: the function of ``sglang.srt.layers.logprob_processor`` that writes the
    accepted tokens' logprobs after a speculative verify: ``"compute_spec_v2_logprobs"`` (takes
    the accept index and ``speculative_num_steps``, one less than its width) or
    ``"compute_spec_logprobs"`` (takes the accept index by keyword, its width read from it).

    ``dflash_platform_protocol``: whether DFLASH's argument handling asks ``current_platform``
    (an out-of-tree platform answers ``supports_speculative_algorithm`` and the draft attention
    backend questions) instead of testing ``server_args.device`` for CUDA / NPU.

    ``draft_backend_resolver``: the function of ``sglang.srt.speculative.draft_worker_common``
    that picks a draft worker's attention backend: ``"_resolve_draft_attention_backend_fallback"``
    (keyword ``draft_server_args``) or ``"resolve_draft_worker_attention_backend"`` (reads the
    published config).

    ``ddtree_devices``: the devices DDTREE has been checked to serve on with this release
    (lossless end to end); on any other device ``--speculative-algorithm DDTREE`` is refused at
    launch (:func:`check_ddtree_serves`).
    """

    version: str
    server_args_record: str
    resolves_in_post_init: bool
    spec_logprobs: str
    dflash_platform_protocol: bool
    draft_backend_resolver: str
    ddtree_devices: Tuple[str, ...]


TRAITS = {
    "0.5.17": ReleaseTraits("0.5.17", server_args_record="dataclass", resolves_in_post_init=True,
                            spec_logprobs="compute_spec_v2_logprobs", dflash_platform_protocol=False,
                            draft_backend_resolver="_resolve_draft_attention_backend_fallback",
                            ddtree_devices=("cuda", "cpu")),
    "0.5.23": ReleaseTraits("0.5.23", server_args_record="struct", resolves_in_post_init=False,
                            spec_logprobs="compute_spec_logprobs", dflash_platform_protocol=True,
                            draft_backend_resolver="resolve_draft_worker_attention_backend",
                            ddtree_devices=("cpu",)),
}


def supported_text() -> str:
    """The supported releases as a user reads them: ``sglang 0.5.17 or 0.5.23``."""
    return "sglang " + " or ".join(SUPPORTED_RELEASES)


def check_release(version: str) -> ReleaseTraits:
    """The traits of ``version``; :class:`UnsupportedSglangRelease` naming the supported
    releases for any version not exactly one of them."""
    if version not in TRAITS:
        raise UnsupportedSglangRelease(
            f"sglang-ddtree supports {supported_text()}; the installed sglang is {version}. "
            f"Install one of them (pip install sglang=={SUPPORTED_RELEASES[-1]})."
        )
    return TRAITS[version]


def installed_release() -> str:
    """The version of the sglang that ``import sglang`` loads (its own ``__version__``)."""
    from sglang.version import __version__

    return __version__


CURRENT = check_release(installed_release())
RELEASE = CURRENT.version


def finish_server_args_class(cls: type) -> type:
    """``cls``, a subclass of sglang's ``ServerArgs`` whose new fields are annotated class
    attributes with defaults, made a record of the same kind as ``ServerArgs``: on a
    ``"dataclass"`` release the dataclass transform adds the fields; on a ``"struct"`` release
    the Struct metaclass already did when the class was created (the dataclass transform would
    fail there: a Struct's ``__match_args__`` is read-only)."""
    if CURRENT.server_args_record == "dataclass":
        return dataclasses.dataclass(cls)
    return cls


def record_fields(cls: type) -> tuple:
    """The fields of a ``ServerArgs`` class on this release, each with ``.name`` and
    ``.default``."""
    if CURRENT.server_args_record == "dataclass":
        return dataclasses.fields(cls)
    import msgspec.structs

    return msgspec.structs.fields(cls)


def compute_accepted_logprobs(batch, logits_output, predict, accept_index) -> None:
    """sglang's logprobs of the accepted tokens after a verify (what its own verify writes into
    ``logits_output`` for the requests that asked for logprobs): ``accept_index`` is
    ``(batch size, max accepted)`` indices of rows of ``predict`` and of the logits."""
    from sglang.srt.layers import logprob_processor

    fn = getattr(logprob_processor, CURRENT.spec_logprobs)
    if CURRENT.spec_logprobs == "compute_spec_v2_logprobs":
        fn(batch, logits_output, predict, accept_index, accept_index.shape[1] - 1)
    else:
        fn(batch, logits_output, predict, accept_index=accept_index)


def check_ddtree_serves(device) -> None:
    """ValueError at launch where DDTREE has not been checked on ``device`` (None: CUDA, sglang's
    default) with this release, naming the flag and the release that serves it there."""
    device = str(device or "cuda").split(":")[0]
    if device not in CURRENT.ddtree_devices:
        serving = [v for v, t in TRAITS.items() if device in t.ddtree_devices]
        raise ValueError(
            f"--speculative-algorithm DDTREE is not served on {device} with sglang {CURRENT.version} yet: its "
            f"{device} path (verify graphs, tree attention and GatedDeltaNet hooks) has not been run against "
            f"this release, so losslessness is not established. Use sglang {' or '.join(serving) or '-'} for "
            f"DDTREE on {device} (docs/sglang-releases.md).")


def run_dflash_handling(server_args) -> None:
    """sglang's DFLASH argument handling (``speculative_hook._handle_dflash``, through the module
    attribute so hooks on it apply) on what DDTREE's ``handle_server_args`` was handed.

    On a release that resolves by writing the record, that is the record. On 0.5.23 it is
    sglang's write-recording stand-in for a plugin's callback (``overrides._ForeignDefaults``):
    what the callback assigns is declared for it, but ``_handle_dflash`` declares its own
    decisions (``declare_resolution``), which on the stand-in land in a non-field attribute and
    would be dropped; they are assigned to the stand-in here, so they are declared (as DDTREE's)
    and what DDTREE reads next sees them."""
    from sglang.srt.arg_groups import speculative_hook

    speculative_hook._handle_dflash(server_args)
    if CURRENT.resolves_in_post_init:
        return
    written = _recorder_writes(server_args)
    if written is None:
        return
    for _source, fields in written.pop("_resolved_overrides", None) or ():
        for name, value in fields.items():
            setattr(server_args, name, value)


def _recorder_writes(server_args):
    """The assignments captured by 0.5.23's write-recording stand-in, or None for anything else."""
    from sglang.srt.arg_groups.overrides import _ForeignDefaults

    if not isinstance(server_args, _ForeignDefaults):
        return None
    return object.__getattribute__(server_args, "_written")


def model_config(server_args):
    """sglang's ``ModelConfig`` of the target of ``server_args`` (a record, or on 0.5.23 also the
    stand-in or a resolving view of one)."""
    if CURRENT.resolves_in_post_init:
        return server_args.get_model_config()
    from sglang.srt.arg_groups.model_override_base import model_config_of

    if _recorder_writes(server_args) is not None:
        server_args = object.__getattribute__(server_args, "_cfg")
    return model_config_of(server_args)


class _ResolvedArgs:
    """0.5.23: a read-only view of a ``ServerArgs`` record with its resolution applied (the record
    itself keeps the operator's input): fields from ``resolved_dict()``, anything else from the
    record."""

    def __init__(self, record):
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_fields", record.resolved_dict())

    def __getattr__(self, name):
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        return getattr(object.__getattribute__(self, "_record"), name)

    def __setattr__(self, name, value):
        raise AttributeError(f"resolved server args are read-only ({name})")


# id(record) -> its view, for records whose resolution finished (the view holds its record, so
# the id is not reused while the entry lives). Hooks ask per request and per forward.
_RESOLVED_VIEWS: dict = {}


def resolved(server_args):
    """``server_args`` as resolved: the record itself on a release that resolves by writing it;
    on 0.5.23 a read-only view (:class:`_ResolvedArgs`), made once per record after its
    resolution finished (``resolved_dict()`` serialises every field)."""
    if CURRENT.resolves_in_post_init or server_args is None or isinstance(server_args, _ResolvedArgs):
        return server_args
    from sglang.srt.arg_groups.overrides import is_record

    if not is_record(server_args):  # a view or the plugin stand-in during resolution: as it is
        return server_args
    if not getattr(server_args, "_resolution_finished", False):
        return _ResolvedArgs(server_args)
    view = _RESOLVED_VIEWS.get(id(server_args))
    if view is None or object.__getattribute__(view, "_record") is not server_args:
        view = _RESOLVED_VIEWS[id(server_args)] = _ResolvedArgs(server_args)
    return view


def cuda_graph_config(server_args):
    """The CUDA-graph configuration sglang captures from (the object its capture reads, so a
    change made to it holds for the capture): ``server_args.cuda_graph_config`` on a release that
    resolves by writing the record (None for None); on 0.5.23 the published execution bag's."""
    if CURRENT.resolves_in_post_init:
        return None if server_args is None else server_args.cuda_graph_config
    from sglang.srt.runtime_context import get_exec

    return get_exec().graph.cuda_graph_config


def req_pool_idx(req) -> int:
    """The request's ``req_to_token`` row: ``req.req_pool_idx`` on 0.5.17, ``req.kv.req_pool_idx``
    on 0.5.23 (the request's KV holdings moved into ``ReqKvInfo``)."""
    if hasattr(req, "kv") and hasattr(req.kv, "req_pool_idx"):
        return int(req.kv.req_pool_idx)
    return int(req.req_pool_idx)
