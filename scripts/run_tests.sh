#!/usr/bin/env bash
# Set up the pinned stack (idempotent) and run the test suite on CPU.
# GPU-only tests are marked `gpu` and skip themselves without a CUDA device.
# Usage: bash scripts/run_tests.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export SGLANG_USE_CPU_ENGINE=${SGLANG_USE_CPU_ENGINE:-1}
exec .venv/bin/python -m pytest -q -p no:cacheprovider test "$@"
