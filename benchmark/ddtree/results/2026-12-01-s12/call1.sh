#!/bin/bash
# Session 12, device call 1 (nvidia-h200), alone on the GPU:
# (a) GPU tests: the CUDA commit ports vs Triton, padded rows, the fast products (solve_precision
#     bf16x3, state_parts 2) vs the float64 path reference;
# (b) the tree GDN verify at 27B shapes, bs 16/1/64/4, budget 64: defaults, the fast products
#     (each alone and both), the prep at 8 warps; per-kernel profile default vs fast; the CUDA
#     commit beside the Triton commit (ours_commit_cuda_ms_48);
# (c) engine cases (tiny hybrid, lossless vs plain): the CUDA commit, padded replays, fast products.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 110 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -s \
   -k "cuda_from_x or cuda_commit or padded or (fast_solve and 65)" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 170 bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 1 64 4 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:64:4:15::::pairs+solvebf16 twostage:64:64:4:15::::pairs+parts2 \
              twostage:64:64:4:15::::pairs+solvebf16+parts2 twostage:64:32:4:15::::pairs+solvebf16+parts2 \
              twostage:64:64:4:15::8::pairs twostage:64:64:4:15::8::pairs+solvebf16+parts2 \
   --profile-impls twostage+pairs twostage+pairs+solvebf16+parts2 \
   --deadline-s 150 --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=215 timeout $(( 585 - $(date +%s) + t0 )) \
   bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 4 \
   --only plain-qwen35,ddtree32-qwen35-wy-cudacommit,ddtree32-qwen35-wy-padded,ddtree64-qwen35-wy-fast > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kb cases && rm -rf prep cases
