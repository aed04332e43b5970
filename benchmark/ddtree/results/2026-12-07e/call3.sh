#!/bin/bash
# nvidia-h100-x1, ~2.5 min on a warm machine. Issue 32: the v2 GSM8K replay at 4 requests,
# DDTREE-auto's engine with the chain and budgets 16 / 64 pinned (call2's auto engine timed out).
# Carry the bundle and benchmark/ddtree/traces/v2/gsm8k.pt.
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
TRACE=benchmark/ddtree/traces/v2/gsm8k.pt CONFIGS="DDTREE-auto" CONC="4" DFLASH_CAP=4 PIN="chain 16 64" PHASES=1 \
  LIMIT=470 DEADLINE=300 CASE_TIMEOUT=440 bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
