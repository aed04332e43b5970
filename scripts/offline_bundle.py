"""Build one compressed archive that turns an offline GPU host with Python 3.12 and torch
2.11.0 (cu130) into a working sglang 0.5.17 + sglang-ddtree host.

Run on a networked machine (this one):

    .venv/bin/python scripts/offline_bundle.py            # -> build/bundle/sglang-ddtree-bundle.tar.xz

On the GPU host:

    mkdir -p /tmp/site && tar -xJf sglang-ddtree-bundle.tar.xz -C /tmp/site
    export PYTHONPATH=/tmp/site

What is in it: a ``pip install --no-deps --target`` of exactly what sglang's import path needs
(the list in ``requirements/cpu-runtime.txt`` plus sglang, sglang-kernel, flashinfer), minus
what a torch image already has (numpy, scipy, pillow, ...: ``IMAGE_PROVIDED``), trimmed of what
the chosen backends never load (``--attention-backend triton``, ``--sampling-backend pytorch``,
bf16): sglang-kernel's flash-attention / FlashMLA / sm100 libraries, sglang's multimodal
generation and test trees, caches. transformers 5.12.1 and tokenizers 0.22.2 are included on
purpose: they must shadow the image's newer versions. Our own package is built from this
checkout and included. The archive is rebuilt only when its inputs change.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bundle"
PINNED = ["sglang==0.5.17", "sglang-kernel==0.4.5", "flashinfer-python==0.6.15.post1"]
PLATFORMS = [
    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64",
    "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64", "any",
]
# Present in the GPU image (torch 2.11 stack), or never imported on sglang's serving path.
IMAGE_PROVIDED = {
    "numpy", "scipy", "pillow", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec",
    "filelock", "typing-extensions", "huggingface-hub", "hf-xet", "safetensors", "sentencepiece",
    "tiktoken", "tqdm", "pyyaml", "requests", "urllib3", "idna", "certifi", "charset-normalizer",
    "regex", "packaging", "numba", "llvmlite", "setuptools",
}
# Paths (relative to the install target) the serving path never loads.
TRIM_GLOBS = [
    "sgl_kernel/**/flash_ops*.so", "sgl_kernel/**/flashmla*.so", "sgl_kernel/**/infllm*.so",
    "sgl_kernel/**/spatial*.so", "sgl_kernel/sm100", "sglang/multimodal_gen", "sglang/test",
    # (dist-info RECORD files stay: tvm_ffi locates native libraries through them.)
    "xgrammar/**/*.a", "**/__pycache__",
    # Pulled in by IPython / outlines / blobfile but not imported on the serving path.
    "jedi", "parso", "pycountry", "Cryptodome",
    # flashinfer JIT needs its headers, not CUTLASS's examples, scripts and docs (its prefill
    # kernels include tools/util/include, e.g. cutlass/util/command_line.h: kept, ~0.8 MiB).
    "flashinfer/data/cutlass/examples", "flashinfer/data/cutlass/python",
    "flashinfer/data/cutlass/tools/util/scripts", "flashinfer/data/cutlass/test", "flashinfer/data/cutlass/docs",
    "flashinfer/data/cutlass/media",
]
# Shared libraries whose debug symbols we strip (the CUDA kernel libraries are left intact).
NO_STRIP = ("sgl_kernel", "tvm_ffi", "flashinfer")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _requirements() -> list[str]:
    reqs = []
    for line in (ROOT / "requirements" / "cpu-runtime.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = line.split("==")[0]
        if _norm(name) in IMAGE_PROVIDED:
            continue
        reqs.append(line)
    return PINNED + reqs


def _inputs_digest(reqs: list[str]) -> str:
    h = hashlib.sha256()
    h.update("\n".join(sorted(reqs)).encode())
    h.update(Path(__file__).read_bytes())
    csrc = ROOT / "python" / "sglang_ddtree" / "kernels" / "csrc"
    for p in sorted((ROOT / "python").rglob("*.py")) + sorted(csrc.glob("*")) + [ROOT / "setup.py", ROOT / "pyproject.toml"]:
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _prebuild_cuda_extension(out_dir: Path) -> None:
    """Build the CUDA tree kernels ahead of time (nvcc, no GPU needed); a bundle without them
    still works (JIT on first use, ~20 s), so a machine without nvcc only says so."""
    sys.path.insert(0, str(ROOT / "python"))
    try:
        from sglang_ddtree.kernels.tree_cuda import PREBUILT_ARCHS, build_prebuilt

        t0 = time.time()
        lib = build_prebuilt(out_dir)
        print(f"[bundle] prebuilt {lib.name} for {PREBUILT_ARCHS} ({lib.stat().st_size / 2**20:.1f} MiB) "
              f"in {time.time() - t0:.0f}s")
    except Exception as e:  # no nvcc / no CUDA torch here
        print(f"[bundle] CUDA tree kernels not prebuilt ({e!r:.200}); the GPU host JIT-builds them")


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def build(force: bool = False) -> Path:
    reqs = _requirements()
    digest = _inputs_digest(reqs)
    archive = OUT / "sglang-ddtree-bundle.tar.xz"
    stamp = OUT / "inputs.sha"
    if archive.exists() and stamp.exists() and stamp.read_text() == digest and not force:
        print(f"[bundle] up to date: {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
        return archive
    t0 = time.time()
    wheels = OUT / "wheels"
    stage = OUT / "site"
    wheels.mkdir(parents=True, exist_ok=True)
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(pip + ["download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                "--implementation", "cp", *plat, "-d", str(wheels), *reqs])
    _run(pip + ["wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)])
    keep = {_norm(r.split("==")[0]) for r in reqs} | {"sglang-ddtree"}
    chosen = [w for w in sorted(wheels.glob("*.whl")) if _norm(w.name.split("-")[0]) in keep]
    if stage.exists():
        shutil.rmtree(stage)
    _run(pip + ["install", "-q", "--no-deps", "--no-compile", "--target", str(stage), *map(str, chosen)])
    # Our wheel carries the CUDA sources (package data); the extension is prebuilt here (an
    # isolated wheel build has no torch to build it with): loaded when its stamp matches the
    # host's torch and the sources, else JIT-built there.
    _prebuild_cuda_extension(stage / "sglang_ddtree" / "kernels" / "prebuilt")
    removed = 0
    for pattern in TRIM_GLOBS:
        for p in list(stage.glob(pattern)):
            removed += _size(p)
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    removed += _strip_shared_libs(stage)
    print(f"[bundle] trimmed {removed / 2**20:.0f} MiB; staged {_size(stage) / 2**20:.0f} MiB")
    tmp = archive.with_suffix(".tmp")
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        for p in sorted(stage.iterdir()):
            tar.add(p, arcname=p.name)
    tmp.replace(archive)
    stamp.write_text(digest)
    print(f"[bundle] {archive} {archive.stat().st_size / 2**20:.1f} MiB in {time.time() - t0:.0f}s")
    return archive


def _strip_shared_libs(stage: Path) -> int:
    strip = shutil.which("strip")
    if strip is None:
        print("[bundle] no `strip` on PATH: shared libraries keep their symbols (larger archive)")
        return 0
    saved = 0
    for so in stage.rglob("*.so"):
        if so.relative_to(stage).parts[0] in NO_STRIP:
            continue
        before = so.stat().st_size
        subprocess.run([strip, "--strip-unneeded", str(so)], check=True)
        saved += before - so.stat().st_size
    return saved


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    build(force=ap.parse_args().force)


if __name__ == "__main__":
    main()
