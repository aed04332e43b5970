#!/bin/bash
# Session 9, device call 1 (nvidia-h200): the bf16x3 products (raw bf16 q/k on bf16 tensor
# cores: pair products one pass, state products over the state split in three bf16 parts).
# GPU accuracy tests first, then kernel timings bf16x3 vs tf32x3 side by side, then the tiny
# hybrid engine cases with SGLANG_DDTREE_WY_PRECISION=bf16x3.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 70 bash scripts/gpu_run.sh --here --out $R/ktest1 test test/core/test_gdn_tree_triton.py -q -k bf16x3 > $R/ktest1.out 2>&1
echo "ktest1 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 150 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 4 1 --budgets 64 32 16 --no-upstream --precision bf16x3 --alt-precisions tf32x3 --alt-impls \
   --variants twostage:64:64:4:15:64 twostage:64:32:4:15:64 twostage:64:32:4:15:16 twostage:64:32:4:15:64:8 \
              twostage:64:64:8:15:64 fused:16:64:4:15 fused:16:64:4:15:::tf32x3 twostage:64:64:4:15:64::tf32x3 \
   --profile-impls twostage --deadline-s 125 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_WY_PRECISION=bf16x3 SGLANG_DDTREE_GPU_CASE_TIMEOUT=200 timeout 215 bash scripts/gpu_run.sh --here --out $R/cases cases \
   --parallel 8 --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree8-qwen35-wy-check,ddtree8-qwen35-default,ddtree-auto-qwen35-wy \
   > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 590 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/ktest2 test test/core/test_gdn_tree_triton.py -q -k "not bf16x3" > $R/ktest2.out 2>&1
echo "ktest2 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest1 ktest2 kbench cases && rm -rf prep cases
