#!/usr/bin/env bash
# Set up the supported sglang releases' stacks (idempotent) and run the test suite on CPU.
# GPU-only tests are marked `gpu` and skip themselves without a CUDA device. Two workers
# (pytest-xdist), each test file whole on one of them: engine start-ups overlap on 2 cores.
#
# Usage:
#   bash scripts/run_tests.sh
#       what CI runs: the whole suite against sglang 0.5.17 (.venv), then the release leg against
#       sglang 0.5.23 (.venv-0.5.23, set up in the background while the first leg runs): the
#       files in RELEASE_LEG below (hooks resolving, flags, metrics, the lossless end-to-end tests)
#   bash scripts/run_tests.sh [pytest args...]
#       the whole suite (or the selection in the args) against sglang 0.5.17 only
#   SGLANG_DDTREE_SGLANG=0.5.23 bash scripts/run_tests.sh [pytest args...]
#       the whole suite (or the selection) against that release only; tests of what is not
#       served there yet skip themselves, saying so
set -euo pipefail
cd "$(dirname "$0")/.."

# The release leg: every file whose behaviour depends on the sglang release (the hook targets
# and release seams, the server flags, the metrics hooks, DDTREE lossless through the engine,
# the HTTP server and under load, plain and DFLASH serving beside the plugin).
RELEASE_LEG=(
  test/compat
  test/engine/test_server_args.py
  test/engine/test_metrics.py
  test/engine/test_worker.py
  test/e2e/test_engine_cpu.py
  test/e2e/test_ddtree_cpu.py
  test/e2e/test_ddtree_http_cpu.py
  test/e2e/test_soak_cpu.py
)

export SGLANG_USE_CPU_ENGINE=${SGLANG_USE_CPU_ENGINE:-1}
# One OpenMP thread per process: the workers and the sglang engines they start share 2 cores, and
# idle OpenMP threads spinning beside them cost the suite about a fifth of its time.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# A release's virtualenv: SGLANG_DDTREE_VENV names the one of the release it is set up for
# (SGLANG_DDTREE_SGLANG, default 0.5.17); the other release keeps its default folder.
venv_of() {
  if [[ -n "${SGLANG_DDTREE_VENV:-}" && $1 == "${SGLANG_DDTREE_SGLANG:-0.5.17}" ]]; then
    echo "$SGLANG_DDTREE_VENV"
  elif [[ $1 == 0.5.17 ]]; then
    echo .venv
  else
    echo ".venv-$1"
  fi
}

run_suite() {  # release, pytest selection and args...
  local release=$1; shift
  echo "[tests] sglang $release: $*"
  "$(venv_of "$release")/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadfile "$@"
}

bash scripts/setup_env.sh
if [[ -n "${SGLANG_DDTREE_SGLANG:-}" || $# -gt 0 ]]; then
  run_suite "${SGLANG_DDTREE_SGLANG:-0.5.17}" test "$@"
  exit
fi

mkdir -p build
SETUP_LOG=build/setup-0.5.23.log
SGLANG_DDTREE_SGLANG=0.5.23 SGLANG_DDTREE_VENV="$(venv_of 0.5.23)" bash scripts/setup_env.sh > "$SETUP_LOG" 2>&1 &
setup_pid=$!
rc=0
run_suite 0.5.17 test || rc=$?
if ! wait "$setup_pid"; then
  echo "[tests] setting up sglang 0.5.23 failed:" >&2
  tail -n 30 "$SETUP_LOG" >&2
  exit 1
fi
tail -n 1 "$SETUP_LOG"
run_suite 0.5.23 "${RELEASE_LEG[@]}" || rc=$?
exit $rc
