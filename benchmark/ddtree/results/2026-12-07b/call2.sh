#!/bin/bash
# nvidia-h200 (needs_h200), ~9.5 min, on the machine call1 left warm. Issue 32's goal in one run on
# one GPU: results/2026-12-07/call1.sh without its GPU tests (they passed on an H100 in
# results/2026-12-07/call12): the retrained drafter's HumanEval trace, DDTREE-auto's engine with
# the chain and budgets 16 / 64 pinned in it, and sglang's DFLASH, at 1 / 4 / 16 requests,
# --phases. CONC, CONFIGS and PIN as there. Carry the bundle and benchmark/ddtree/traces/v2/humaneval.pt.
TESTS= END=${END:-580} bash $(dirname "$0")/../2026-12-07/call1.sh
