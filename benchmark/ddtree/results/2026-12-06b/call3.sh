#!/bin/bash
# Prepared, not run: seven H200 starts failed on 2026-12-06; call5.sh ran on an H100 instead.
# Any kind (nvidia-h200 for DFLASH at 4: on an H100 it starts only for one request), ~9 min.
# Issue 29's "4 and 64 requests measured and reported beside them": DDTREE-15 (the default), the
# chain and sglang's DFLASH at 4 and 64 requests (DFLASH capped at 16: at 64 it cannot allocate
# its GatedDeltaNet scratch at 27B shapes), two timed rounds of 32 tokens, --phases; call2.sh's
# settings with decode graphs [4, 64]. Carry the bundle (assets' drafter and the traces moved aside).
CONC="4 64" GRAPHS="[4,64]" CONFIGS="DDTREE-15 DFLASH DDTREE-chain" SWEEP="--max-concurrency DFLASH=16" \
  bash "$(dirname "$0")/call2.sh"
