#!/usr/bin/env bash
# Set up the pinned stack (idempotent) and run the test suite on CPU.
# GPU-only tests are marked `gpu` and skip themselves without a CUDA device. Two workers
# (pytest-xdist), each test file whole on one of them: engine start-ups overlap on 2 cores.
# Usage: bash scripts/run_tests.sh [extra pytest args]
#        SGLANG_DDTREE_SGLANG=0.5.23 bash scripts/run_tests.sh [...]   (the suite against sglang 0.5.23,
#        in .venv-0.5.23; tests of what is not served there yet skip themselves, saying so)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export SGLANG_USE_CPU_ENGINE=${SGLANG_USE_CPU_ENGINE:-1}
# One OpenMP thread per process: the workers and the sglang engines they start share 2 cores, and
# idle OpenMP threads spinning beside them cost the suite about a fifth of its time.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
case "${SGLANG_DDTREE_SGLANG:-0.5.17}" in
  0.5.17) VENV=${SGLANG_DDTREE_VENV:-.venv} ;;
  *) VENV=${SGLANG_DDTREE_VENV:-.venv-$SGLANG_DDTREE_SGLANG} ;;
esac
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadfile test "$@"
