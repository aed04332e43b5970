#!/bin/bash
# Prepared in session 8 for the next session (not run yet), device call 3 (nvidia-h200): the
# whole tree-GDN kernel test file compiled on the GPU (session 8's runs of the new twostage impl
# stopped at their time limits after 27 and 17 passes, none failed), then the hybrid smoke cases
# with the engine's auto impl (twostage for trees of 17-65 nodes since session 8; session 8 ran
# them with SGLANG_DDTREE_WY_IMPL=twostage forced).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 300 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=220 timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/cases cases \
   --parallel 8 --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree8-qwen35-wy-check,ddtree8-qwen35-default,ddtree-auto-qwen35-wy,ddtree16-qwen35-wy-oracle-sibling-graphs \
   > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest cases && rm -rf prep cases
