#!/usr/bin/env bash
# Qwen3.6-27B + the z-lab DFlash drafter with DDTREE on one 8-GPU host (8 x RTX PRO 6000
# Blackwell): REPLICAS containers of TP GPUs each (TP x REPLICAS <= the host's GPUs), replica i
# on GPUs i*TP .. i*TP+TP-1 and port BASE_PORT+i; put a load balancer in front for one endpoint.
#
#   docker/serve-qwen36.sh --target DIR --draft DIR [--tp 2] [--replicas 4] [--step-cost FILE]
#                          [--image sglang-ddtree:0.1.0.dev0] [--base-port 30000] [--gpus 8]
#                          [--print] [-- EXTRA SGLANG FLAGS...]
#
# --step-cost: the budget-auto table measured for this model on this GPU (step_cost.py), mounted
# read-only into each container (--speculative-ddtree-budget auto); without it, budget 15.
# --print: print the docker commands instead of running them.
set -euo pipefail
TARGET="" DRAFT="" TP=2 REPLICAS=4 STEP_COST="" IMAGE=sglang-ddtree:0.1.0.dev0 BASE_PORT=30000 GPUS=8 PRINT=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) TARGET=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --tp) TP=$2; shift 2 ;;
    --replicas) REPLICAS=$2; shift 2 ;;
    --step-cost) STEP_COST=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --gpus) GPUS=$2; shift 2 ;;
    --print) PRINT=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "serve-qwen36.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ -n $TARGET && -n $DRAFT ]] || { echo "serve-qwen36.sh: --target and --draft are required" >&2; exit 2; }
if (( TP < 1 || REPLICAS < 1 || TP * REPLICAS > GPUS )); then
  echo "serve-qwen36.sh: --tp $TP x --replicas $REPLICAS does not fit $GPUS GPUs" >&2; exit 2
fi
for (( i = 0; i < REPLICAS; i++ )); do
  devices=$(seq -s, $(( i * TP )) $(( i * TP + TP - 1 )))
  port=$(( BASE_PORT + i ))
  run=(docker run -d --name "sglang-ddtree-$i" --restart unless-stopped --gpus "\"device=$devices\""
       --ipc=host --shm-size 16g -p "$port:30000"
       -v "$TARGET:/models/target:ro" -v "$DRAFT:/models/drafter:ro")
  serve=(--tp "$TP")
  if [[ -n $STEP_COST ]]; then
    run+=(-v "$STEP_COST:/config/step_cost.json:ro")
    serve+=(--step-cost /config/step_cost.json)
  fi
  run+=("$IMAGE" "${serve[@]}")
  (( $# )) && run+=(-- "$@")
  if [[ $PRINT == 1 ]]; then printf '%q ' "${run[@]}"; echo; else "${run[@]}"; fi
done
