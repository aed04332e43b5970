#!/bin/bash
# nvidia-h100-x1, ~4 min on a warm machine (~6 on a fresh one). Prepared. Issue 32: the v2
# MT-Bench replay at 4 requests (call5 ran one request), at the 2% chain margin: DDTREE-auto's
# engine with the chain and budgets 16 / 64 pinned, sglang's DFLASH sized for 4 requests.
# Carry the bundle and benchmark/ddtree/traces/v2/mt_bench.pt only (64 MiB with the bundle).
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
TRACE=benchmark/ddtree/traces/v2/mt_bench.pt CONFIGS="DDTREE-auto DFLASH" CONC="4" DFLASH_CAP=4 PIN="16 chain 64" PHASES=1 \
  LIMIT=${END:-400} DEADLINE=$(( ${END:-400} - 120 )) CASE_TIMEOUT=${CASE_TIMEOUT:-300} \
  bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
