#!/bin/bash
# Session 7, device call 2 (nvidia-h200): (1) alone on the GPU, the tree-GDN kernels at
# Qwen3.6-27B shapes, bs 1/16, B 16/64 (fused / split / inverse verify, fused vs per-layer
# commit); (2) then the radix-rerun controls: the same rerun without speculation and with
# sglang's DFLASH (call 1: both DDTREE radix cases failed it, snapshot and wy alike).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 16 --budgets 16 64 --alt-precisions tf32 --deadline-s 90 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=300 timeout 320 bash scripts/gpu_run.sh --here --out $R/radix cases --parallel 4 \
   --only nospec-qwen35-radix,dflash-qwen35-radix > $R/radix.out 2>&1
echo "radix rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz kbench radix prep && rm -rf kbench radix prep
