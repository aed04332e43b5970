#!/bin/bash
# Prepared, not run (seven H200 starts failed on 2026-12-06; on 2026-12-07 every H200 and H100 start failed); superseded by results/2026-12-07/call1.sh.
# nvidia-h200 (needs_h200: sglang's DFLASH at 16 requests does not fit an H100 at 27B shapes), ~9 min.
# Issue 32's goal in one run on one GPU: the retrained drafter's HumanEval trace
# (benchmark/ddtree/traces/v2/humaneval.pt), DDTREE-auto (the decayed-mean estimates of c91e488)
# with the chain and budgets 16 / 64 pinned (the table's choices) in its engine, and sglang's DFLASH, at 1 / 4 / 16
# requests, --phases (device ms per step and phase: where auto's step differs from its pinned choices);
# the settings of results/2026-12-04/replay.sh. Carry the bundle and that trace.
TRACE=benchmark/ddtree/traces/v2/humaneval.pt CONFIGS="DDTREE-auto DFLASH" CONC="1 4 16" PIN="chain 16 64" PHASES=1 \
  bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh
