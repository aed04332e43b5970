#!/bin/bash
# Any one-GPU kind, ~5 min (what the session's device time left allows): the step statistics
# kernel's GPU tests (test/core/test_gpu.py) and, at one request on the v2 HumanEval trace,
# DDTREE-auto against budget 16 pinned in the same engine (--phases: the step outside the phases,
# where the policy's own kernels were). Carry the bundle built from this commit and that trace.
R=${OUT:?}
export SGLANG_DDTREE_STEP_STATS_KERNEL=1  # the step statistics in one launch (off by default until measured)
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
timeout 100 bash scripts/gpu_run.sh --here --out $R/t test test/core/test_gpu.py > $R/t.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
tail -n 3 $R/t.out >> $R/rc.txt
el=$(( $(date +%s) - t0 ))
TRACE=benchmark/ddtree/traces/v2/humaneval.pt CONFIGS="DDTREE-auto" CONC="1" PIN="16" PHASES=1 \
  LIMIT=$(( ${END:-300} - el )) DEADLINE=$(( ${END:-300} - 170 - el )) bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
cd $R && tar czf t.tgz t.out t 2>/dev/null; rm -rf t t.out
