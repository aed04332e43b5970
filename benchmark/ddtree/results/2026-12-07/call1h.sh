#!/bin/bash
# Any kind, ~9.5 min: call1.sh on an H100, where sglang's DFLASH starts only sized for one request:
# DFLASH at one request (run first), DDTREE-auto with its pinned choices at 1 / 4 / 16.
DFLASH_CAP=1 CONFIGS="DFLASH DDTREE-auto" bash "$(dirname "$0")/call1.sh"
