#!/bin/bash
# Session 12, device call 2 (nvidia-h200), alone on the GPU, at the new defaults (solve in bf16x3,
# state in two bf16 parts; CUDA commit rewritten: whole value rows per block, float4 state,
# Triton's exp/div/sqrt):
# (a) GPU tests: CUDA commits vs Triton (the bf16 rounding mismatch of call 1), fast products;
# (b) engine cases (tiny hybrid, lossless vs plain) at the new defaults: budgets 8/32/64, CUDA commit;
# (c) bs 16/64, budget 64: value tiles of 128 (4 and 8 warps) beside the default;
# (d) issue 6's table beside upstream in one run: bs 1/4/16, chain and budgets 16/32/64.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 100 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -s \
   -k "cuda_from_x or cuda_commit or (fast_solve and 65)" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=170 timeout 180 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 5 \
   --only plain-qwen35,ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree64-qwen35-wy,ddtree32-qwen35-wy-cudacommit > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 80 bash scripts/gpu_run.sh --here --out $R/kbv bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 64 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:128:4:15::::pairs twostage:64:128:8:15::4::pairs twostage:64:64:8:15::4::pairs \
   --deadline-s 60 --out $R/kbv/gdn.json > $R/kbv.out 2>&1
echo "kbv rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 16 32 64 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s $(( 560 - $(date +%s) + t0 )) --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest cases kbv kb && rm -rf prep cases
