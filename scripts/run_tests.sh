#!/usr/bin/env bash
# Set up the pinned stack (idempotent) and run the test suite on CPU.
# GPU-only tests are marked `gpu` and skip themselves without a CUDA device. Two workers
# (pytest-xdist), each test file whole on one of them: engine start-ups overlap on 2 cores.
# Usage: bash scripts/run_tests.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export SGLANG_USE_CPU_ENGINE=${SGLANG_USE_CPU_ENGINE:-1}
# One OpenMP thread per process: the workers and the sglang engines they start share 2 cores, and
# idle OpenMP threads spinning beside them cost the suite about a fifth of its time.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile test "$@"
