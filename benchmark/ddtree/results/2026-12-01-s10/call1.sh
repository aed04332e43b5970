#!/bin/bash
# Run in session 10 as device call 1 (commit be67fbf); the lines below are the session-9 preparation.
# Prepared in session 9 for the next session (not run yet), device call 1 (nvidia-h200): two
# twostage options, off by default until timed: the pair products formed inside the prep
# (pairs_in_prep) and the apply pass's key products first (split_qk; AOT sm_90 spill at 64-wide
# tiles 872 -> 248 B). GPU accuracy tests of the twostage variants, kernel timings with and
# without them at the auto rule's tiles, per-kernel profiles, then the tiny hybrid cases with both
# forced (SGLANG_DDTREE_WY_PAIRS_IN_PREP=1 SGLANG_DDTREE_WY_SPLIT_QK=1), plain reference in the
# same call.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 120 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -k "twostage" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 170 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 4 1 --budgets 64 32 16 --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:32:4:15:16 twostage:64:32:4:15::::pairs twostage:64:32:4:15:16:::splitqk \
              twostage:64:64:4:15:64 twostage:64:64:4:15:64:::splitqk twostage:64:64:4:15::::pairs \
              twostage:64:64:4:15::::pairs+splitqk \
   --profile-impls twostage twostage+pairs+splitqk --deadline-s 150 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_WY_PAIRS_IN_PREP=1 SGLANG_DDTREE_WY_SPLIT_QK=1 SGLANG_DDTREE_GPU_CASE_TIMEOUT=215 timeout $(( 585 - $(date +%s) + t0 )) \
   bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 4 \
   --only plain-qwen35,ddtree8-qwen35-wy,ddtree8-qwen35-wy-check,ddtree32-qwen35-wy > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kbench cases && rm -rf prep cases
