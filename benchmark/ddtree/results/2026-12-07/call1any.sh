#!/bin/bash
# Any one-GPU kind, ~9.5 min: call1.sh where the card fits sglang's DFLASH sized for 16 requests
# (an H200), else call1h.sh (an H100: DFLASH at one request only).
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n1)
echo "GPU memory ${mem} MiB" > ${OUT:?}/kind.txt
here=$(dirname "$0")
if (( ${mem:-0} > 100000 )); then bash $here/call1.sh; else bash $here/call1h.sh; fi
