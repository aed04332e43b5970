"""CUDA tree kernels (``kernels/csrc/ddtree_tree.cu``): one launch builds the best-first
tree and its verify layout, one launch walks it. Bit-identical to
``core.tree_builder.build_tree_reference`` / ``core.verify_layout`` / ``core.accept``.

The extension is loaded prebuilt when a build for this torch and these sources ships in the
package (``kernels/prebuilt/``: the wheel build and the offline bundle make one ahead of time,
without a GPU, by :func:`build_prebuilt`: SASS for sm_90, sm_100 and sm_120, PTX of sm_120 for
newer parts), else compiled on first use with ``torch.utils.cpp_extension`` for the current GPU
from the sources shipped beside it (``kernels/csrc/``, cached under the build directory). Where
neither works, :func:`available` says why; the worker then refuses to start on a GPU unless
``--speculative-ddtree-allow-slow-kernels`` asks for the torch implementation in
``sglang_ddtree.core`` (and the Triton commit).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Optional

import torch

from ..config import BUILD_DIR, VERBOSE_BUILD
from ..config import PREBUILT_DIR as PREBUILT_DIR_ENV
from ..core.accept import Acceptance
from ..core.tree_builder import DraftTree, _caps
from ..core.verify_layout import VerifyLayout


_CSRC = Path(__file__).resolve().parent / "csrc"  # package data: in the checkout and in the wheel


_NAME = "sglang_ddtree_tree"
_SOURCES = ("ddtree_bind.cpp", "ddtree_tree.cu", "ddtree_gdn_commit.cu", "ddtree_step_stats.cu")
_CFLAGS = ["-O3"]
PREBUILT_DIR = Path(__file__).resolve().parent / "prebuilt"
# H200 (measured), B200, RTX PRO 6000 Blackwell (the user's host); PTX of the last for newer parts.
PREBUILT_ARCHS = "9.0;10.0;12.0+PTX"


def runs_on(archs: str, major: int, minor: int) -> bool:
    """Whether a build for ``archs`` (``TORCH_CUDA_ARCH_LIST`` syntax) runs on a device of compute
    capability ``major.minor``: its SASS for exactly that capability, or PTX of one not newer."""
    for a in archs.replace(" ", ";").split(";"):
        if not a:
            continue
        ptx = a.endswith("+PTX")
        ma, mi = (int(x) for x in a.removesuffix("+PTX").split("."))
        if (ma, mi) == (major, minor) or (ptx and (ma, mi) <= (major, minor)):
            return True
    return False


def build_stamp() -> dict:
    """What a prebuilt extension must match to be loaded: torch, its CUDA, the sources, flags."""
    import hashlib

    h = hashlib.sha256()
    for name in _SOURCES:
        h.update(name.encode() + b"\0" + (_CSRC / name).read_bytes())
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "sources": h.hexdigest()[:16], "cflags": _CFLAGS}


def _load_prebuilt(directory: Path):
    """The prebuilt module in ``directory`` if its stamp matches this torch and these sources."""
    import importlib.machinery
    import importlib.util
    import json

    stamp = directory / f"{_NAME}.json"
    libs = sorted(directory.glob(f"{_NAME}*.so"))
    if not stamp.exists() or not libs or not _CSRC.exists():
        return None
    have, want = json.loads(stamp.read_text()), build_stamp()
    if {k: have.get(k) for k in want} != want:
        return None
    if torch.cuda.is_available() and not runs_on(have.get("archs", ""), *torch.cuda.get_device_capability()):
        return None
    loader = importlib.machinery.ExtensionFileLoader(_NAME, str(libs[0]))
    spec = importlib.util.spec_from_file_location(_NAME, str(libs[0]), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    mod.ddtree_origin = f"prebuilt for {have.get('archs')} ({directory})"
    return mod


def build_prebuilt(out_dir: Path, archs: str = PREBUILT_ARCHS) -> Path:
    """Compile the extension for ``archs`` without a GPU (nvcc + a CUDA torch) into ``out_dir``
    with its stamp; returns the shared library. Raises when no toolkit can build it."""
    import json
    import shutil
    import tempfile

    import torch.utils.cpp_extension as ext

    out_dir.mkdir(parents=True, exist_ok=True)
    old = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = archs
    old_home = ext.CUDA_HOME
    # torch guesses CUDA_HOME from the nvcc on PATH; a wrapper script there (as on our CPU
    # machines) hides the toolkit's headers. Prefer an explicit CUDA_HOME, then the standard one.
    for home in (os.environ.get("CUDA_HOME"), ext.CUDA_HOME, "/usr/local/cuda"):
        if home and Path(home, "include", "cuda_runtime_api.h").exists():
            ext.CUDA_HOME = home
            break
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _compile(tmp)
            lib = next(Path(tmp).glob(f"{_NAME}*.so"))
            for old_lib in out_dir.glob(f"{_NAME}*.so"):
                old_lib.unlink()
            dest = out_dir / lib.name
            shutil.copy2(lib, dest)
    finally:
        ext.CUDA_HOME = old_home
        if old is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = old
    (out_dir / f"{_NAME}.json").write_text(json.dumps(dict(build_stamp(), archs=archs), indent=1))
    return dest


def _compile(build_directory: Optional[Path]):
    """JIT-compile (and import) the extension for TORCH_CUDA_ARCH_LIST, in ``build_directory``
    (None: torch's extension cache)."""
    from torch.utils.cpp_extension import load

    return load(name=_NAME, sources=[str(_CSRC / n) for n in _SOURCES], extra_cuda_cflags=_CFLAGS,
                build_directory=None if build_directory is None else str(build_directory),
                verbose=bool(VERBOSE_BUILD.get()))


@functools.lru_cache(maxsize=1)
def _load():
    directory = Path(PREBUILT_DIR_ENV.get() or PREBUILT_DIR)
    prebuilt = _load_prebuilt(directory)
    if prebuilt is not None:
        return prebuilt
    out = None
    if BUILD_DIR.get():
        out = Path(BUILD_DIR.get()) / "torch_ext" / "ddtree_tree"
        out.mkdir(parents=True, exist_ok=True)
    mod = _compile(out)
    mod.ddtree_origin = f"JIT-built from {_CSRC} (no prebuilt build in {directory} matches this torch and GPU)"
    return mod


def origin() -> str:
    """Where the loaded extension came from: prebuilt (for which archs, where) or JIT-built."""
    return _load().ddtree_origin


def serves(device, allow_slow: bool) -> bool:
    """Whether the CUDA kernels serve ``device``. False on CPU devices, and on a GPU where they
    cannot load with ``allow_slow`` (the caller uses ``sglang_ddtree.core``'s torch path); there
    without ``allow_slow``: RuntimeError with the reason and the fix."""
    if not str(device).startswith("cuda"):
        return False
    why = available()
    if why is None:
        return True
    if allow_slow:
        return False
    raise RuntimeError(
        f"DDTREE: the CUDA tree kernels cannot load on this GPU ({why}). Install the sglang-ddtree wheel "
        "built for this torch (it ships the kernels prebuilt for sm_90, sm_100 and sm_120, PTX for newer), or "
        "give the JIT build a CUDA toolkit matching torch (nvcc on PATH or CUDA_HOME); or pass "
        "--speculative-ddtree-allow-slow-kernels to serve with the torch tree builder and the Triton commit "
        "(slower).")


@functools.lru_cache(maxsize=1)
def available() -> Optional[str]:
    """None when the kernels can be used, else the reason they cannot. Decided once per process:
    a failed JIT build is not retried by every caller (the worker, the GatedDeltaNet commit)."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not (_CSRC / "ddtree_tree.cu").exists():
        return f"kernel sources not found at {_CSRC}"
    try:
        _load()
    except Exception as e:  # compiler missing, wrong toolkit, ...
        return f"build failed: {e}"
    return None


def build_tree_and_layout(
    lp: torch.Tensor,
    ids: torch.Tensor,
    root_tokens: torch.Tensor,
    prefix_lens: torch.Tensor,
    budget: int,
    max_siblings: Optional[int] = None,
    max_depth: Optional[int] = None,
) -> tuple[DraftTree, VerifyLayout]:
    """Same contract as ``core.step.draft_tree_to_verify``; ``lp``/``ids``: ``[bs, L, K]``."""
    L, K = lp.shape[1], lp.shape[2]
    l_eff, k_eff = _caps(L, K, max_siblings, max_depth)
    outs = _load().build_tree_layout(
        lp.float().contiguous(), ids.long().contiguous(), root_tokens.long().contiguous(),
        prefix_lens.long().contiguous(), budget, l_eff, k_eff,
    )
    t_depth, t_parent, t_rank, t_token, t_score, tokens, depth, pos, parent, first, nxt, mask = outs
    bs, n = tokens.shape
    tree = DraftTree(depth=t_depth, parent=t_parent, rank=t_rank, token=t_token, score=t_score)
    layout = VerifyLayout(
        tokens=tokens, depth=depth, positions=pos, parent=parent, ancestor_mask=mask,
        first_child=first, next_sibling=nxt,
        retrieve_index=torch.arange(bs * n, device=tokens.device).view(bs, n),
    )
    return tree, layout


def tree_walk(layout: VerifyLayout, target: torch.Tensor, max_depth: int) -> Acceptance:
    accepted, accept_len, new_tokens = _load().tree_walk(
        layout.tokens.contiguous(), layout.first_child.contiguous(),
        layout.next_sibling.contiguous(), target.long().contiguous(), max_depth,
    )
    return Acceptance(accepted=accepted, accept_len=accept_len, new_tokens=new_tokens, num_new=accept_len + 1)


def step_stats(accepted, accept_len, depth, stats, shadow=None, policy_sums=None):
    """One launch for a step's statistics (``kernels/csrc/ddtree_step_stats.cu``), in place:

    - ``stats`` (``metrics.DDTreeStats``): ``accept_hist``, ``depth_hist``, ``nodes`` as
      ``DDTreeStats.record(accept_len, depth)`` adds them, and ``shadow_hist`` /
      ``shadow_censored`` as ``record_shadow`` when ``stats.shadow`` and ``shadow`` is given;
    - ``shadow``: ``(rank [bs, M], chain_tokens [bs, Lc] (any strides), bonus [bs], max_depth)``,
      the arguments of ``core.shadow_chain.shadow_chain_accept`` (``rank`` without the root);
    - ``policy_sums``: ``(sums [C] f64, budgets [known] i64, off, chain_sum)`` from
      ``BudgetPolicy.begin_record`` (``chain_sum`` 1: add ``accept_len``, 2: the shadow's).

    ``accepted [bs, T]``, ``accept_len [bs]``, ``depth [bs, M]`` int64. Returns the shadow's
    ``(chain_accept [bs] int64, censored [bs] bool)``, or None without ``shadow``."""
    i64 = lambda t: t.to(torch.int64).contiguous()  # noqa: E731
    accepted, accept_len = i64(accepted), i64(accept_len)
    bs = accepted.shape[0]
    rank = chain = bonus = out = cens = None
    depth_l = 0
    if shadow is not None:
        rank, chain, bonus, depth_l = shadow
        rank, bonus, chain = i64(rank), i64(bonus), chain.to(torch.int64)
        out = torch.empty(bs, dtype=torch.int64, device=accepted.device)
        cens = torch.empty(bs, dtype=torch.bool, device=accepted.device)
    sh = shadow is not None and stats.shadow
    sums = budgets = None
    off = chain_sum = 0
    if policy_sums is not None:
        sums, budgets, off, chain_sum = policy_sums
    _load().step_stats(
        accepted, accept_len, i64(depth), int(stats.max_depth), stats.accept_hist, stats.depth_hist, stats.nodes,
        rank, chain, bonus, int(depth_l), out, cens, stats.shadow_hist if sh else None,
        stats.shadow_censored if sh else None, sums, budgets, int(off), int(chain_sum),
    )
    stats.batch_steps += 1
    return None if shadow is None else (out, cens)


def gdn_tree_commit(state, state_idx, u, G, k, accepted, accept_len) -> None:
    """CUDA tree-GDN state commit, same contract as ``gdn_tree.tree_gdn_commit``."""
    _load().gdn_tree_commit(
        state, state_idx.to(torch.int32).contiguous(), u, G, k.contiguous(),
        accepted.to(torch.int32).contiguous(), accept_len.to(torch.int32).contiguous(),
    )


def gdn_tree_commit_from_x_layers(state, state_idx, u, G, x, w_tab, b_tab, conv_width: int, conv_state,
                                  k_offset: int, num_k_heads: int, accepted, accept_len, dst_idx=None) -> None:
    """CUDA port of the engine's commit, same contract as
    ``gdn_tree.tree_gdn_commit_from_x_layers`` (every layer of a run in one launch, keys
    recomputed from the pre-conv inputs, products rounded as sglang's conv; ``dst_idx``: write
    into slot ``dst_idx[b]`` instead, -1 skips)."""
    from .gdn_tree.dots import layer_stride

    L, bs, N, HV, V = u.shape
    T, C = x.shape[1], x.shape[2]
    if conv_state.shape[3] + 1 != int(conv_width):
        raise ValueError(f"gdn_tree_commit_from_x_layers: conv_state keeps {conv_state.shape[3]} columns, "
                         f"not conv_width - 1 = {int(conv_width) - 1}")
    i32 = lambda t: t.to(torch.int32).contiguous()  # noqa: E731
    _load().gdn_tree_commit_from_x_layers(
        state, i32(state_idx), u, G, x, w_tab, b_tab, conv_state, i32(accepted), i32(accept_len),
        None if dst_idx is None else i32(dst_idx), int(k_offset), int(num_k_heads),
        layer_stride(state, state.shape[1:]), layer_stride(u, (bs, N, HV, V)), layer_stride(G, (bs, N, HV)),
        layer_stride(x, (T, C)), int(conv_state.stride(0)) if L > 1 else 0,
    )
