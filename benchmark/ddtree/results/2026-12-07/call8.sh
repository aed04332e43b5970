#!/bin/bash
# Any one-GPU kind. Issue 29: DDTREE-16 with SGLANG_DDTREE_SKINNY_GEMM=$TABLE (call7/skinny_gemm_m16_m17.json:
# the M = 16 and 17 tilings) against DDTREE-16 without it, one request: call5.sh's step-cost sweep
# (END default 470). Run on the machine call6 left warm. Carry the bundle.
CONFIGS="DDTREE-16@2 DDTREE-16" SKINNY="DDTREE-16@2" CASE_TIMEOUT=200 END=${END:-470} bash "$(dirname "$0")/call5.sh"
