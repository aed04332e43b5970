#!/bin/bash
# nvidia-h100-x1 (any one-GPU kind), ~6 min. Prepared. Issue 32 at 16 requests without DFLASH
# (it does not start sized for 16 on an H100): results/2026-12-07b/call4.sh's DDTREE-auto sized for
# 64 requests did not start there (call4/ddtree-auto-error.txt), so this sizes it for 16: the v2
# HumanEval trace, DDTREE-auto's engine with the chain and budgets 16 / 64 pinned, at 16 requests
# (no speculation at 16: results/2026-12-07b/call4, 37.28 / 38.56 tokens/s per request).
# Carry the bundle and benchmark/ddtree/traces/v2/humaneval.pt (the rest moved aside).
R=${OUT:?}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
TRACE=benchmark/ddtree/traces/v2/humaneval.pt CONFIGS="DDTREE-auto" CONC=16 \
  PIN="chain 16 64" PHASES=1 LIMIT=${END:-420} DEADLINE=$(( ${END:-420} - 150 )) CASE_TIMEOUT=${CASE_TIMEOUT:-380} \
  bash $(dirname "$0")/../2026-12-06/next-replay-v2.sh
