#!/bin/bash
# Session 12, device call 4 (nvidia-h200), short: issue 6's goal shapes at the defaults after
# call 3 (register_limit: 32-wide tiles and 168 registers a thread at bs 16).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout $(( 150 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 1 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:64:4:15::::pairs+nreg0 --deadline-s 100 --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
