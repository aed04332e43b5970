#!/bin/bash
# nvidia-h200 (needs_h200), ~9.5 min, on the machine call1 left warm. Issue 32's goal in one run on
# one GPU: the retrained drafter's HumanEval trace (benchmark/ddtree/traces/v2/humaneval.pt),
# DDTREE-auto's engine with the chain and budgets 16 / 64 pinned in it, and sglang's DFLASH, at
# 1 / 4 / 16 requests, --phases (results/2026-12-07/call1.sh without its GPU tests, which passed
# on an H100 in results/2026-12-07/call12). CONC (default '1 4 16'), CONFIGS and PIN as there.
# Carry the bundle and that trace.
R=${OUT:?}
here=$(dirname "$0")
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
el=$(( $(date +%s) - t0 ))
TRACE=${TRACE:-benchmark/ddtree/traces/v2/humaneval.pt} CONFIGS="${CONFIGS:-DDTREE-auto DFLASH}" CONC="${CONC:-1 4 16}" \
  PIN="${PIN-chain 16 64}" PHASES=1 LIMIT=$(( ${END:-580} - el )) DEADLINE=$(( ${END:-580} - 165 - el )) \
  bash $here/../2026-12-06/next-replay-v2.sh
