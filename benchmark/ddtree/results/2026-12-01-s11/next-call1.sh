#!/bin/bash
# Prepared in session 11 (not run yet), device call 1 (nvidia-h200), alone on the GPU:
# sgl-kernel's CUDA port of the engine's wy state commit (SGLANG_DDTREE_WY_COMMIT=cuda, off until
# timed): its GPU test against the Triton kernel, its timing beside the Triton commit at 27B
# shapes (ours_commit_cuda_ms_48 vs ours_commit_ms_48, root-only and 6-node paths; bs 1/4/16/64
# at budget 64), the tiny-hybrid engine case through it, and the prep at 8 warps with pairs in the
# prep (AOT: spill 976 -> 184 B on sm_90; session 9 timed pw8 only before pairs moved into the prep),
# and ddtree32-qwen35-wy-padded: every verify a padded graph replay (the 64-request crash's path).
# The prebuilt extension in the bundle must be rebuilt first (offline_bundle.py) or the host JIT-builds it.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 120 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q \
   -k "cuda_from_x or cuda_commit or padded" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 150 bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 64 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:64:4:15::8::pairs twostage:64:32:4:15::8::pairs \
   --deadline-s 130 --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=215 timeout $(( 585 - $(date +%s) + t0 )) \
   bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 3 \
   --only plain-qwen35,ddtree32-qwen35-wy-cudacommit,ddtree32-qwen35-wy-padded > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kb cases && rm -rf prep cases
