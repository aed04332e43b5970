"""Build hook of the sglang-ddtree wheel: it carries the CUDA tree kernels prebuilt
(``sglang_ddtree/kernels/prebuilt/``: SASS for sm_90, sm_100 and sm_120, PTX of sm_120) beside
their sources (``kernels/csrc/``, package data), so an installed wheel serves at full speed
without a compiler. Building them needs nvcc and the pinned CUDA torch in the build environment:
``pip wheel --no-build-isolation`` (``scripts/build_wheel.sh`` does it and checks the result).
Without them the wheel still builds, with a warning, and the extension is JIT-built on first use
on a GPU host with a toolkit. Editable installs build nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        out = Path(self.build_lib) / "sglang_ddtree" / "kernels" / "prebuilt"
        try:
            sys.path.insert(0, str(ROOT / "python"))
            from sglang_ddtree.kernels.tree_cuda import PREBUILT_ARCHS, build_prebuilt

            lib = build_prebuilt(out)
            print(f"sglang-ddtree: CUDA tree kernels prebuilt for {PREBUILT_ARCHS} ({lib.name})")
        except Exception as e:  # no torch (isolated build), no nvcc, no CUDA torch
            print(f"sglang-ddtree: WARNING: the wheel carries no prebuilt CUDA tree kernels ({e!r:.300}); "
                  "build with nvcc and `pip wheel --no-build-isolation` (scripts/build_wheel.sh)", file=sys.stderr)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled extension: tag it for this Python and platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithKernels}, distclass=BinaryDistribution)
