#!/bin/bash
# Prepared in session 8 for the next session (not run yet), device call 3 (nvidia-h200): the
# whole tree-GDN kernel test file compiled on the GPU (session 8's runs of the new twostage impl
# stopped at their time limits after 27 and 17 passes, none failed), the auto rule's kernel
# timings, then the hybrid smoke cases with the engine's auto impl (twostage for trees of 17-65
# nodes since session 8; session 8 ran them with SGLANG_DDTREE_WY_IMPL=twostage forced). The
# oracle cases wait for the plain reference's output before they start: not in this call.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 240 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
# The auto rule's picks as the engine runs them ("ours": auto, depth bound 15) beside the tile
# combinations session 8 did not time together (32-wide value tiles with 16/64-node pair tiles).
timeout 140 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 16 32 64 --no-upstream --alt-precisions --alt-impls fused twostage \
   --variants twostage:64:32:4:15:16 twostage:64:64:4:15:16 twostage:64:32:4:15:64 twostage:64:64:4:15:64 \
   --deadline-s 110 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=220 timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/cases cases \
   --parallel 8 --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree8-qwen35-wy-check,ddtree8-qwen35-default,ddtree-auto-qwen35-wy \
   > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kbench cases && rm -rf prep cases
