#!/bin/bash
# Run as: TRACE=benchmark/ddtree/traces/v2/humaneval.pt DFLASH_CAP=1 CONC="1 4 16" \
#   bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
# on the warm nvidia-h100-x1 of call10 (no H200 started this session): the v2 HumanEval trace
# (the retrained drafter's; the largest tree / chain gain of the v2 sets, RESULTS 4), DDTREE-auto
# with the chain and budgets 16 / 64 pinned in its engine, and sglang's DFLASH at one request only
# (DFLASH_CAP=1: on an H100 it does not start sized for more at 27B shapes). Outputs: call11/
# (rc.txt, replay.json, replay.png), logs in call11.tgz. Carry the bundle and that trace.
TRACE=benchmark/ddtree/traces/v2/humaneval.pt DFLASH_CAP=1 CONC="1 4 16" \
  bash "$(dirname "$0")/next-replay-v2.sh"
