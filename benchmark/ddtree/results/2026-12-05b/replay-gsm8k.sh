#!/bin/bash
# nvidia-h200, ~9.5 min: issue 32 deliverable 3 and its goal with the strongest trace (drafter v2,
# GSM8K, benchmark/ddtree/traces/v2/gsm8k.pt): tokens/s per request for DDTREE-auto, sglang's
# DFLASH and DDTREE-16 at 1 and 16 requests, budget auto choosing over sweep.sh's table (this
# session's commit). Carry the bundle and the GSM8K v2 trace (assets' drafter and the other traces
# moved aside). Usage: AUTO_TABLE=<sweep's step_cost.json> bash replay-gsm8k.sh
here=$(dirname "$0")
TRACE=benchmark/ddtree/traces/v2/gsm8k.pt CONFIGS=${CONFIGS:-DDTREE-auto DFLASH DDTREE-16} CONC=${CONC:-1 16} \
  AUTO_TABLE=${AUTO_TABLE:?sweep.sh step_cost.json} bash $here/../2026-12-04/replay.sh
