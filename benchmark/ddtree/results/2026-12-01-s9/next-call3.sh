#!/bin/bash
# Prepared in session 9 for the next session (not run yet), device call 3 (nvidia-h200): issue 6's
# full benchmark grid at the defaults then in force (bf16x3, auto impl and tiles): bs 1/4/16/64,
# B 16/32/64/128/256 and the 16-node chain, ours beside sglang's per-node verify kernel (chain and
# tree modes, skipped where its snapshots do not fit), extra memory per request, tf32x3 beside.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 64 --budgets 16 32 64 128 256 --precision bf16x3 --alt-precisions tf32x3 --alt-impls \
   --deadline-s 520 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep kbench && rm -rf prep
