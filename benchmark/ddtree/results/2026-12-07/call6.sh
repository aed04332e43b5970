#!/bin/bash
# Any one-GPU kind. Issue 29's one-request ratios with the skinny GEMM switch: sglang's DFLASH,
# DDTREE-15 and the chain with SGLANG_DDTREE_SKINNY_GEMM=$TABLE (call2g's sweep, H100), and
# DDTREE-15 without it, one sweep: call5.sh's step-cost sweep with these configurations (END
# default 470). Carry the bundle.
CONFIGS="DFLASH DDTREE-15@2 DDTREE-chain@2 DDTREE-15" SKINNY="DDTREE-15@2 DDTREE-chain@2" CASE_TIMEOUT=200 \
  END=${END:-470} bash "$(dirname "$0")/call5.sh"
