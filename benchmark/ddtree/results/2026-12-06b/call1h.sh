#!/bin/bash
# nvidia-h100-x1 (three H200 starts failed): call1.sh with sglang's DFLASH at one request only
# (on an H100 it does not start sized for more at 27B shapes), ~6.5 min. Carry the bundle and the
# v2 HumanEval trace.
DFLASH_CAP=1 bash "$(dirname "$0")/call1.sh"
