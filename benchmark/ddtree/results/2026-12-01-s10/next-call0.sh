#!/bin/bash
# Prepared in session 10 (not run yet), device call 0 — before next-call1..4 (nvidia-h200): the
# twostage apply pass as a CUDA programmatic dependent of its prep (tree_gdn_verify(pdl=True),
# engine SGLANG_DDTREE_WY_PDL=1; off by default until timed). GPU tests (PDL bit-equal to the
# plain launch under graph replay; the +pdl impls against the float64 references), then timings
# at the auto rule's tiles with and without pdl (65 nodes: pairs in the prep; 17/33: pair kernel),
# then the tiny hybrid cases with SGLANG_DDTREE_WY_PDL=1 (ddtree32 runs twostage), plain in the
# same call. If pdl pays, make it the default where it does (issue 6: bs 1, B 64 was 1.63 ms).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -k "pdl" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 170 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 64 32 16 --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:32:4:15::::pairs twostage:64:32:4:15::::pairs+pdl \
              twostage:64:64:4:15::::pairs twostage:64:64:4:15::::pairs+pdl \
              twostage:64:64:4:15:16:::nopairs twostage:64:64:4:15:16:::nopairs+pdl \
              twostage:64:64:4:15:64:::nopairs twostage:64:64:4:15:64:::nopairs+pdl \
   --deadline-s 150 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_WY_PDL=1 SGLANG_DDTREE_GPU_CASE_TIMEOUT=215 timeout $(( 585 - $(date +%s) + t0 )) \
   bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 3 \
   --only plain-qwen35,ddtree32-qwen35-wy,ddtree8-qwen35-wy-check > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kbench cases && rm -rf prep cases
