#!/bin/bash
# nvidia-h100-x1, fits what is left of a session's device time (END seconds, default 420). Issue 32:
# budget auto's evidence rule in the engine on the trace where the one-request-step policy settled
# on the chain (results/2026-12-07b/call5: 708 of 710 steps, 0.79x budget 16 pinned), one request
# only: DDTREE-auto's engine with the chain and budgets 16 / 64 pinned in it, then sglang's DFLASH
# (cut first by the limit; auto against its pinned choices is read inside one engine).
# results/2026-12-07c/call1.sh is the same at 1 and 4 requests in a whole call. Carry the bundle
# and benchmark/ddtree/traces/v2/gsm8k.pt (assets' drafter and the other traces moved aside).
# CONFIGS and PIN (defaults "DDTREE-auto DFLASH", "chain 16 64") trim it further.
R=${OUT:?}
END=${END:-420}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
TRACE=benchmark/ddtree/traces/v2/gsm8k.pt CONFIGS=${CONFIGS:-DDTREE-auto DFLASH} CONC=1 DFLASH_CAP=1 \
  PIN=${PIN:-chain 16 64} PHASES=1 LIMIT=$END DEADLINE=$(( END - 110 )) CASE_TIMEOUT=${CASE_TIMEOUT:-220} \
  bash $(dirname "$0")/../2026-12-06/next-replay-v2.sh
