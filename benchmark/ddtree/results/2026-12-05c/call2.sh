#!/bin/bash
# nvidia-h200 (DFLASH at 16 requests needs more than an H100's 80 GB at 27B shapes), ~9.5 min.
# Issue 32 deliverable 3 and its goal with the strongest trace (drafter v2, GSM8K,
# benchmark/ddtree/traces/v2/gsm8k.pt): tokens/s per request for DDTREE-auto, sglang's DFLASH and
# DDTREE-16 at 1 and 16 requests (results/2026-12-04/replay.sh). Budget auto chooses over the
# step-cost tables of the current step (no change to the step since 59cafef): 25c7b85's chain and
# budget 64 (results/2026-12-03c/call4b), then e4a8476's budget 16 (results/2026-12-04b/call1), at
# 1 and 16 requests. Carry the bundle and the GSM8K v2 trace (assets' drafter and the other traces
# moved aside).
here=$(dirname "$0")
T=benchmark/ddtree/results
TRACE=benchmark/ddtree/traces/v2/gsm8k.pt CONFIGS=${CONFIGS:-DDTREE-auto DFLASH DDTREE-16} CONC=${CONC:-1 16} \
  AUTO_TABLE="$T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json" \
  bash $here/../2026-12-04/replay.sh
