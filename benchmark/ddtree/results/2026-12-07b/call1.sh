#!/bin/bash
# nvidia-h200 (needs_h200: sglang's DFLASH sized for 16 requests does not fit an H100 at 27B shapes), ~9.5 min.
# Issue 29's ratios at 1 and 16 requests at the current commit, one sweep on one GPU
# (results/2026-12-06b/call2.sh's settings): sglang's DFLASH; DDTREE-auto's engine with budget 16,
# the chain and budget 64 pinned in it (the issue's DDTREE-16, chain and DDTREE-64 goals from one
# engine start); DDTREE-15 (the default) with the H100's shipped GEMM table (no table is shipped
# for the H200: is the H100's faster than cuBLAS here too?), and DDTREE-15 with the default (auto:
# cuBLAS on an H200). Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
T=benchmark/ddtree/results
# The H100's table, its meta.device relabelled to this GPU (gemm_table.load_table refuses a table
# measured on another card): an experiment's file, not a shipped table.
python3 - python/sglang_ddtree/kernels/gemm_tables/nvidia_h100_80gb_hbm3.json \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)" $R/h100_table.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["meta"]["measured_on"], t["meta"]["device"] = t["meta"]["device"], sys.argv[2]
json.dump(t, open(sys.argv[3], "w"), indent=1)
PY
CONFIGS="DFLASH DDTREE-auto DDTREE-15@2 DDTREE-15" \
  SWEEP="--auto-table $T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json --pin 16 chain 64
         --config-arg DDTREE-15@2:speculative_ddtree_gemm_table=\"$R/h100_table.json\"" \
  bash $(dirname "$0")/../2026-12-06b/call2.sh
