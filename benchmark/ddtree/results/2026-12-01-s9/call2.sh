#!/bin/bash
# Session 9, device call 2 (nvidia-h200): the twostage prep without P = Qc T (the apply pass
# multiplies Qc into its u), bf16x3 the default, the retuned auto rule. GPU accuracy tests of
# twostage/bf16x3/auto, kernel timings (auto bf16x3 vs tf32x3, tile variants), then the tiny
# hybrid engine cases with the defaults, plain reference in the same call.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 75 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -k "twostage or bf16x3 or auto_impl" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 110 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 4 1 --budgets 64 32 --no-upstream --precision bf16x3 --alt-precisions tf32x3 --alt-impls \
   --variants twostage:64:32:4:15:16 twostage:64:64:4:15:64 \
   --profile-impls twostage --deadline-s 90 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=215 timeout 225 bash scripts/gpu_run.sh --here --out $R/cases cases \
   --parallel 4 --only plain-qwen35,ddtree8-qwen35-wy,ddtree8-qwen35-wy-check,ddtree32-qwen35-wy > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kbench cases && rm -rf prep cases
