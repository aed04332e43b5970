#!/bin/bash
# H100, ~5 min, run right after call13.sh on the same held machine: call1.sh (issue 32, the v2
# HumanEval trace) at one request, sglang's DFLASH first, then DDTREE-auto with chain / 16 / 64
# pinned, the step-statistics kernel on. Carry the bundle and that trace.
CONC=1 END=420 bash "$(dirname "$0")/call1h.sh"
