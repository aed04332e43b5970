#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min a call): issue 32 deliverable 3 with the drafter v2's
# traces (benchmark/ddtree/traces/v2/, the strongest: GSM8K DDTREE-16 1.91 tokens per step on the
# simulator) and budget auto over a table of the current commit (next-autotable.sh A and B first):
#   AUTO_TABLE='<A>/step_cost.json <B>/step_cost.json' bash next-replay-v2.sh gsm8k
#   (then humaneval, mt_bench; CONFIGS= to change the list)
# Carry the bundle and that trace (assets' drafter and the other traces moved aside).
here=$(dirname "$0")
set=${1:?gsm8k, humaneval or mt_bench}
TRACE=benchmark/ddtree/traces/v2/$set.pt CONFIGS=${CONFIGS:-DDTREE-auto DFLASH DDTREE-16 no-spec} \
  AUTO_TABLE=${AUTO_TABLE:?the step_cost.json files of next-autotable.sh A and B} \
  bash $here/../2026-12-04/replay.sh
