#!/bin/bash
# Prepared in session 10 (not run yet), device call 0 — before next-call1..4 (nvidia-h200): the
# twostage apply pass as a CUDA programmatic dependent of its prep (tree_gdn_verify(pdl=True),
# engine SGLANG_DDTREE_WY_PDL=1) and the prep's inverse by 32-node halves (prep_halves=True,
# SGLANG_DDTREE_WY_PREP_HALVES=1); both off by default until timed. GPU tests (PDL bit-equal to the
# plain launch under graph replay; the +pdl impls against the float64 references), then timings
# at the auto rule's tiles with and without pdl (65 nodes: pairs in the prep; 17/33: pair kernel),
# then the tiny hybrid cases: budget 64 at the defaults (65 nodes, pairs in the prep: never yet
# run in the engine) and with the three switches on (halves, pdl, the flat tree conv: its timing
# is the bench's ours_conv_flat_ms_48 column), budget 32, plain in the same call. What pays becomes the default where it does (issue 6: bs 1,
# B 64 was 1.63 ms, goal 1.5; bs 16, B 64 9.89, goal 8). Also the apply pass alone at 8 warps
# (":8:15::4:" = apply 8, prep 4; session 9 timed 8 warps for both kernels, not the apply alone:
# AOT, its 64-wide tiles spill 392 B instead of 872).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -k "test_pdl_apply or test_prep_halves_on_65 or (bf16x3 and (pdl or halves))" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 110 bash scripts/gpu_run.sh --here --out $R/kb64 bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:32:4:15::::pairs twostage:64:32:4:15::::pairs+pdl twostage:64:32:4:15::::pairs+halves \
              twostage:64:32:4:15:16:::nopairs+halves twostage:64:32:4:15::::pairs+halves+pdl \
              twostage:64:64:4:15::::pairs twostage:64:64:4:15::::pairs+pdl twostage:64:64:4:15::::pairs+halves \
              twostage:64:64:4:15:64:::nopairs+halves twostage:64:64:4:15::::pairs+halves+pdl \
              twostage:64:64:8:15::4::pairs twostage:64:32:8:15::4::pairs \
   --profile-impls twostage+pairs+halves twostage+nopairs+halves --deadline-s 95 --out $R/kb64/gdn.json > $R/kb64.out 2>&1
echo "kb64 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 90 bash scripts/gpu_run.sh --here --out $R/kb32 bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 32 16 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:64:4:15:16:::nopairs twostage:64:64:4:15:16:::nopairs+pdl \
              twostage:64:64:4:15:64:::nopairs twostage:64:64:4:15:64:::nopairs+pdl \
   --deadline-s 75 --out $R/kb32/gdn.json > $R/kb32.out 2>&1
echo "kb32 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=215 timeout $(( 585 - $(date +%s) + t0 )) \
   bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 4 \
   --only plain-qwen35,ddtree64-qwen35-wy,ddtree64-qwen35-wy-options,ddtree32-qwen35-wy > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kb64 kb32 cases && rm -rf prep cases
