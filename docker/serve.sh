#!/usr/bin/env bash
# Entry point of the sglang-ddtree image: sglang's OpenAI-compatible server with
# --speculative-algorithm DDTREE.
#
#   sglang-ddtree-serve [--model DIR] [--draft DIR] [--tp N] [--port P] [--step-cost FILE]
#                       [--print] [-- EXTRA SGLANG FLAGS...]
#
# --model / --draft: the target and the DFlash drafter (default /models/target, /models/drafter,
# mounted volumes); --tp: tensor-parallel size (default 1); --port (default 30000); --step-cost:
# a step-cost table from benchmark/ddtree/step_cost.py for this model and GPU, which turns on
# --speculative-ddtree-budget auto (default: the fixed budget 15); --print: print the command
# instead of running it. Everything after `--` goes to sglang unchanged.
set -euo pipefail
MODEL=/models/target DRAFT=/models/drafter TP=1 PORT=30000 STEP_COST="" PRINT=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --tp) TP=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --step-cost) STEP_COST=$2; shift 2 ;;
    --print) PRINT=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) echo "sglang-ddtree-serve: unknown option '$1' (sglang flags go after --)" >&2; exit 2 ;;
  esac
done
cmd=(python3 -m sglang.launch_server --model-path "$MODEL" --host 0.0.0.0 --port "$PORT" --tp-size "$TP"
     --speculative-algorithm DDTREE --speculative-draft-model-path "$DRAFT")
if [[ -n $STEP_COST ]]; then
  cmd+=(--speculative-ddtree-budget auto --speculative-ddtree-step-cost "$STEP_COST")
fi
cmd+=("$@")
if [[ $PRINT == 1 ]]; then
  printf '%q ' "${cmd[@]}"; echo
  exit 0
fi
exec "${cmd[@]}"
