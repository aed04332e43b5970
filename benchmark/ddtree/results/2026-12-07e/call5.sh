#!/bin/bash
# nvidia-h100-x1, ~4 min on a warm machine. Issue 32: the v2 MT-Bench replay at 1 request,
# DDTREE-auto with budget 16 and the chain pinned in its engine, and sglang's DFLASH.
# Carry the bundle and benchmark/ddtree/traces/v2/mt_bench.pt (no other trace: 64 MiB).
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
TRACE=benchmark/ddtree/traces/v2/mt_bench.pt CONFIGS="DDTREE-auto DFLASH" CONC="1" DFLASH_CAP=4 PIN="16 chain" PHASES=1 \
  LIMIT=250 DEADLINE=150 CASE_TIMEOUT=150 bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
