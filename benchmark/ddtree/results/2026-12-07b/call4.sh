#!/bin/bash
# nvidia-h100-x1 (any one-GPU kind), ~9.5 min. Prepared. Issue 32's rows that need no DFLASH beside
# them, on the retrained drafter's HumanEval trace (benchmark/ddtree/traces/v2/humaneval.pt): no
# speculation at 1 / 4 / 16 / 64 requests, and DDTREE-auto's engine with the chain and budgets
# 16 / 64 pinned in it at 16 and 64 requests (1 and 4 are call14 and call3; sglang's DFLASH
# does not start sized for more than 4 requests on an H100 at 27B shapes). replay.sh's settings.
# Carry the bundle and that trace (assets' drafter and the other traces moved aside).
R=${OUT:?}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
TRACE=benchmark/ddtree/traces/v2/humaneval.pt CONFIGS="no-spec DDTREE-auto" CONC="${CONC:-1 4 16 64}" \
  PIN="chain 16 64" PHASES=1 LIMIT=${END:-585} DEADLINE=$(( ${END:-585} - 150 )) CASE_TIMEOUT=${CASE_TIMEOUT:-420} \
  bash $(dirname "$0")/../2026-12-06/next-replay-v2.sh
