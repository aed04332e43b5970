#!/bin/bash
# nvidia-h200 (needs_h200: sglang's DFLASH at 16 requests does not fit an H100 at 27B shapes), ~9.5 min.
# (a) The step statistics kernel's GPU tests (test/core/test_gpu.py: tree_cuda.step_stats against
# the torch forms; the step program free of host synchronisation) and (b) issue 32's goal in one
# run on one GPU with it: the retrained drafter's HumanEval trace (benchmark/ddtree/traces/v2/
# humaneval.pt), DDTREE-auto (c91e488's estimates) with the chain and budgets 16 / 64 pinned in its
# engine, and sglang's DFLASH, at 1 / 4 / 16 requests, --phases (results/2026-12-06b/call1.sh with
# the step's counters, shadow chain and budget-auto sums in one launch). Carry the bundle built
# from this commit (its prebuilt extension has the new kernel) and that trace.
R=${OUT:?}
export SGLANG_DDTREE_STEP_STATS_KERNEL=1  # the step statistics in one launch (off by default until measured)
# CONC (default '1 4 16'), CONFIGS (default 'DDTREE-auto DFLASH'), PIN (default 'chain 16 64') and END
# (seconds the call may take, default 565) give other sweeps of it (call1h.sh, call2s.sh); DFLASH_CAP
# reaches replay.sh.
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
TESTS=${TESTS-test/core/test_gpu.py}  # (empty: no tests, the whole call for the replay)
if [[ -n $TESTS ]]; then
  timeout 100 bash scripts/gpu_run.sh --here --out $R/t test $TESTS > $R/t.out 2>&1
  echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
  tail -n 3 $R/t.out >> $R/rc.txt
fi
el=$(( $(date +%s) - t0 ))
TRACE=benchmark/ddtree/traces/v2/humaneval.pt CONFIGS="${CONFIGS:-DDTREE-auto DFLASH}" CONC="${CONC:-1 4 16}" PIN="${PIN-chain 16 64}" PHASES=1 \
  LIMIT=$(( ${END:-565} - el )) DEADLINE=$(( ${END:-565} - 165 - el )) bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
[[ -n $TESTS ]] && cd $R && tar czf t.tgz t.out t 2>/dev/null; rm -rf $R/t $R/t.out
