#!/bin/bash
# Session 8, device call 2 (nvidia-h200): (1) the radix cases with the completed extra-buffer
# switch (tracking on the tiny hybrid) and the no_buffer DFLASH control without log-probs;
# (2) the new tree-GDN impls "block" and "twostage": GPU accuracy tests, then timings and a
# per-kernel profile at Qwen3.6-27B shapes beside fused/split.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=300 timeout 320 bash scripts/gpu_run.sh --here --out $R/radix cases --parallel 10 \
   --only ddtree8-qwen35-wy-check-xb-radix,ddtree8-qwen35-xb-radix,ddtree8-qwen35-wy-xb-radix,dflash-qwen35-xb-radix,nospec-qwen35-xb-radix,dflash-qwen35-radix,ddtree8-qwen35-radix,ddtree8-qwen35-wy-radix \
   > $R/radix.out 2>&1
echo "radix rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 130 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -x \
   -k "block or twostage or depth_bound or squarings" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
left=$(( 560 - $(date +%s) + t0 ))
timeout $left bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 16 --budgets 16 64 --no-upstream --alt-precisions --alt-impls fused split block twostage \
   --variants block:64:32:8 block:64:64:4 twostage:64:32:8 twostage:64:64:4 twostage:64:128:8 twostage:64:64::15 block:64:64::15 fused:16:64::15 \
   --profile-impls fused twostage --deadline-s $(( left - 40 )) --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz radix prep ktest kbench && rm -rf radix prep ktest
