#!/bin/bash
# nvidia-h200 (needs_h200: DFLASH at 16 requests does not fit an H100 at 27B shapes), ~8-9 min.
# Run once on an H100 with DFLASH capped at one request (call11.sh). Issue 32's goal with the
# trace of the largest tree / chain gain (drafter v2, HumanEval,
# benchmark/ddtree/traces/v2/humaneval.pt): tokens/s per request for DDTREE-auto, sglang's DFLASH and
# the fixed DDTREE choices chain / 16 / 64 at 1, 4 and 16 requests, in two engines: DDTREE-auto's
# serves the fixed choices pinned (replay_bench.py --pin, SGLANG_DDTREE_BENCH_PIN), one engine
# start instead of four. Budget auto chooses over the step-cost tables of the current step
# (25c7b85's chain and budget 64, results/2026-12-03c/call4b; e4a8476's budget 16,
# results/2026-12-04b/call1), at 1 and 16 requests. Carry the bundle and the HumanEval v2 trace
# (assets' drafter and the other traces moved aside). A second call with CONFIGS=no-spec gives the
# no-speculation rows; TRACE=benchmark/ddtree/traces/v2/{gsm8k,mt_bench}.pt the other sets
# (carry that trace instead).
here=$(dirname "$0")
T=benchmark/ddtree/results
TRACE=${TRACE:-benchmark/ddtree/traces/v2/humaneval.pt} CONFIGS=${CONFIGS:-DDTREE-auto DFLASH} CONC=${CONC:-1 4 16} \
  PIN=${PIN-chain 16 64} AUTO_TABLE="$T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json" \
  CASE_TIMEOUT=${CASE_TIMEOUT:-420} bash $here/../2026-12-04/replay.sh
