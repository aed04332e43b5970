#!/bin/bash
# Any one-GPU kind, ~5 min (what the session's device time left allows): call1.sh's GPU tests and,
# at one request on the v2 HumanEval trace, DDTREE-auto against budget 16 pinned in the same
# engine (--phases: the step outside the phases, where the policy's own kernels were). Carry the
# bundle built from this commit and that trace.
CONFIGS="DDTREE-auto" CONC="1" PIN="16" END=${END:-300} bash "$(dirname "$0")/call1.sh"
