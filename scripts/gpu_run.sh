#!/usr/bin/env bash
# One-command GPU runner for developers.
#
#   bash scripts/gpu_run.sh --host USER@GPUHOST [--out DIR] test  [pytest args...]
#   bash scripts/gpu_run.sh --host USER@GPUHOST [--out DIR] bench SCRIPT [args...]
#   bash scripts/gpu_run.sh --here             [--out DIR] (test|bench|cases) ...
#
# On this (networked) machine: builds the offline bundle if its inputs changed
# (scripts/offline_bundle.py), copies the bundle and this checkout to the GPU host, runs the
# selection there with `--here`, and copies the results folder back to --out
# (default build/gpu-results/<timestamp>).
#
# With --here (on the GPU host itself, or through a tool that already ships the checkout, such
# as the device tool: carry build/bundle/sglang-ddtree-bundle.tar.xz and .whl): extracts the
# bundle once per archive digest, puts this checkout's python/ in front of it (so code edits do
# not need a new bundle), installs pytest from .whl/ if the host lacks it, and runs:
#   test  ARGS  -> python -m pytest ARGS        (GPU results under $OUT/tests)
#   bench ARGS  -> python ARGS --out $OUT/...   (the script decides its file names)
#   cases ARGS  -> python test/e2e/gpu_cases.py all --out $OUT/cases ARGS
# Everything is logged to $OUT/run.log.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HOST="" HERE=0 OUTDIR=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --host) HOST=$2; shift 2 ;;
    --here) HERE=1; shift ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || { echo "gpu_run.sh: name what to run: test|bench|cases ..." >&2; exit 2; }
BUNDLE=$ROOT/build/bundle/sglang-ddtree-bundle.tar.xz

if [[ $HERE == 0 ]]; then
  [[ -n $HOST ]] || { echo "gpu_run.sh: give --host USER@GPUHOST, or --here on the GPU host" >&2; exit 2; }
  PY=$ROOT/.venv/bin/python; [[ -x $PY ]] || PY=python3
  "$PY" "$ROOT/scripts/offline_bundle.py"
  OUTDIR=${OUTDIR:-$ROOT/build/gpu-results/$(date +%Y%m%d-%H%M%S)}
  REMOTE=/tmp/sglang-ddtree-run
  ssh "$HOST" "rm -rf $REMOTE/src && mkdir -p $REMOTE/src/build/bundle $REMOTE/out"
  scp -q "$BUNDLE" "$HOST:$REMOTE/src/build/bundle/"
  git -C "$ROOT" ls-files -co --exclude-standard -z | tar -C "$ROOT" --null -T - -czf - | \
    ssh "$HOST" "tar -xzf - -C $REMOTE/src"
  [[ -d $ROOT/.whl ]] && scp -qr "$ROOT/.whl" "$HOST:$REMOTE/src/"
  set +e
  ssh "$HOST" "cd $REMOTE/src && bash scripts/gpu_run.sh --here --out $REMOTE/out $(printf '%q ' "$@")"
  rc=$?
  set -e
  mkdir -p "$OUTDIR" && scp -qr "$HOST:$REMOTE/out/." "$OUTDIR/"
  echo "[gpu_run] rc=$rc results in $OUTDIR"
  exit $rc
fi

OUT=${OUTDIR:-${OUT:-$ROOT/build/gpu-results/$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
SITE=${SGLANG_DDTREE_SITE:-/tmp/sglang-ddtree-site}
[[ -f $BUNDLE ]] || { echo "gpu_run.sh: no bundle at $BUNDLE (build it with scripts/offline_bundle.py)" >&2; exit 2; }
DIGEST=$(sha256sum "$BUNDLE" | cut -c1-16)
if [[ "$(cat "$SITE/.bundle-digest" 2>/dev/null)" != "$DIGEST" ]]; then
  t0=$(date +%s)
  rm -rf "$SITE" && mkdir -p "$SITE"
  tar -xJf "$BUNDLE" -C "$SITE"
  echo "$DIGEST" > "$SITE/.bundle-digest"
  echo "[gpu_run] bundle $DIGEST extracted to $SITE in $(( $(date +%s) - t0 )) s"
fi
export PYTHONPATH="$ROOT/python:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export SGLANG_DDTREE_BUILD_DIR=${SGLANG_DDTREE_BUILD_DIR:-/tmp/sglang-ddtree-build}
export SGLANG_DDTREE_GPU_RESULTS=$OUT
# The bundle's prebuilt CUDA tree kernels (used when built from these sources for this torch).
if [[ -d $SITE/sglang_ddtree/kernels/prebuilt && -z ${SGLANG_DDTREE_PREBUILT_DIR:-} ]]; then
  export SGLANG_DDTREE_PREBUILT_DIR=$SITE/sglang_ddtree/kernels/prebuilt
fi
if [[ -z ${TORCH_CUDA_ARCH_LIST:-} ]]; then
  TORCH_CUDA_ARCH_LIST=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")
  export TORCH_CUDA_ARCH_LIST
fi
if ! python3 -c "import pytest" 2>/dev/null; then
  python3 -m pip install -q --no-index --target "$SITE" "$ROOT"/.whl/*.whl
fi
python3 - <<'EOF'
import torch, sglang, sglang_ddtree
print(f"[gpu_run] {torch.cuda.get_device_name()} torch {torch.__version__} sglang {sglang.__version__} "
      f"sglang_ddtree from {sglang_ddtree.__file__}")
EOF
what=$1; shift
cd "$ROOT"
case "$what" in
  test) python3 -m pytest -q -p no:cacheprovider -rA "$@" ;;
  bench) script=$1; shift; python3 "$script" "$@" ;;
  cases) python3 test/e2e/gpu_cases.py all --out "$OUT/cases" "$@" ;;
  *) echo "gpu_run.sh: unknown selection '$what' (test|bench|cases)" >&2; exit 2 ;;
esac
