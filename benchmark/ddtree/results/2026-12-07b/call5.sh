#!/bin/bash
# nvidia-h100-x1 (any one-GPU kind), ~9.5 min a trace. Prepared. Issue 32 on the retrained
# drafter's other prompt sets at the current commit: TRACE=benchmark/ddtree/traces/v2/gsm8k.pt
# (default) or .../v2/mt_bench.pt; DDTREE-auto's engine with the chain and budgets 16 / 64 pinned
# in it, and sglang's DFLASH sized for 4 requests, at 1 and 4 requests; replay.sh's settings.
# Carry the bundle and that trace (assets' drafter and the other traces moved aside).
R=${OUT:?}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
TRACE=${TRACE:-benchmark/ddtree/traces/v2/gsm8k.pt} CONFIGS="DDTREE-auto DFLASH" CONC="${CONC:-1 4}" DFLASH_CAP=4 \
  PIN="chain 16 64" PHASES=1 LIMIT=${END:-585} DEADLINE=$(( ${END:-585} - 150 )) CASE_TIMEOUT=${CASE_TIMEOUT:-240} \
  bash $(dirname "$0")/../2026-12-06/next-replay-v2.sh
