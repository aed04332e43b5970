#!/bin/bash
# Session 8, device call 3 (nvidia-h200): tree-GDN impls block / twostage after call 2's
# timings (twostage 4 warps, depth bound 15, 64-node pair tiles): GPU accuracy tests, timings
# at bs 1/4/16 x B 16/32/64 with a per-kernel profile, then tiny-hybrid wy engines with
# SGLANG_DDTREE_WY_IMPL=twostage (lossless checks) and the engine's default GDN mode.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 120 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q \
   -k "(block or twostage) and (match_path_reference or several_chunks or depth_bound or refuses)" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 200 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 16 32 64 --no-upstream --alt-precisions --alt-impls fused split block twostage \
   --variants twostage:64:64:4:15 twostage:64:64:4:15:16 twostage:64:64:4:15:32 twostage:64:32:4:15 \
              block:64:64::15 block:64:64:4:15 block:64:64::15:16 fused:16:64::15 split:16:64::15 \
   --profile-impls twostage block --deadline-s 150 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_WY_IMPL=twostage SGLANG_DDTREE_GPU_CASE_TIMEOUT=200 timeout $(( 585 - $(date +%s) + t0 )) \
   bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 8 \
   --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree8-qwen35-wy-check,ddtree8-qwen35-default,ddtree-auto-qwen35-wy \
   > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kbench cases && rm -rf prep ktest cases
