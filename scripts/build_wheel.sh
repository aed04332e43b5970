#!/usr/bin/env bash
# Build the release wheel into dist/ (or $1): sglang-ddtree with its CUDA tree kernels prebuilt
# (sm_90, sm_100, sm_120 SASS + sm_120 PTX, against the pinned torch) and their sources. Needs the
# pinned stack (bash scripts/setup_env.sh) and nvcc; fails if the wheel lacks the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
mkdir -p "$OUT"
rm -rf build/lib build/bdist.* "$OUT"/sglang_ddtree-*.whl
.venv/bin/python -m pip --disable-pip-version-check wheel -q --no-deps --no-build-isolation -w "$OUT" .
wheel=$(ls "$OUT"/sglang_ddtree-*.whl)
.venv/bin/python - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["sglang_ddtree/kernels/prebuilt/sglang_ddtree_tree.json", "sglang_ddtree/kernels/csrc/ddtree_tree.cu",
        "sglang_ddtree/kernels/csrc/ddtree_gdn_commit.cu", "sglang_ddtree/kernels/csrc/ddtree_step_stats.cu",
        "sglang_ddtree/kernels/csrc/ddtree_bind.cpp"]
missing = [n for n in need if n not in names]
missing += [] if any(n.startswith("sglang_ddtree/kernels/prebuilt/sglang_ddtree_tree") and n.endswith(".so")
                     for n in names) else ["sglang_ddtree/kernels/prebuilt/sglang_ddtree_tree*.so"]
if missing:
    sys.exit(f"build_wheel.sh: {sys.argv[1]} lacks {missing} (nvcc and the CUDA torch are needed to build it)")
print(f"[build_wheel] {sys.argv[1]}: {len(names)} files, CUDA tree kernels prebuilt")
PY
