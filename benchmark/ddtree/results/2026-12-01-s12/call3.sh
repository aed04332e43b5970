#!/bin/bash
# Session 12, device call 3 (the device was lent again after the pause) (nvidia-h200), alone on the GPU: issue 6's
# remaining bs-16 gap (8.16 ms at budget 64, goal 8) and the rest of its table.
# (a) GPU test of prep_group (value heads of one key head per prep program, pair products shared);
# (b) bs 16/64/4/1, budget 64: prep_group 3 (pairs in the prep, parked in the pair buffers;
#     prep at 4 and 8 warps) and the pair kernel + grouped prep, beside the default, with a
#     per-kernel profile; both twostage kernels at 168 registers a thread (three programs per SM
#     instead of two; AOT sm_90: stack 720 -> 1416 B apply, 880 -> 2176 B prep);
# (c) the table's rows call 2 did not reach: bs 64 at budgets 16/32 and the chain, budgets 128 /
#     256 at bs 1/4/16 (ours: fused / split beyond 65 nodes), upstream for bs 16 (chain, 16, 32).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 75 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -s \
   -k "prep_group or register_limit" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 170 bash scripts/gpu_run.sh --here --out $R/kbg bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 64 4 1 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --variants twostage:64:64:4:15::::pairs+group3 twostage:64:64:4:15::8::pairs+group3 \
              twostage:64:64:4:15::::nopairs+group3 twostage:64:64:4:15::::pairs \
              twostage:64:64:4:15::::pairs+nreg168 twostage:64:32:4:15::::pairs+nreg168 \
   --profile-impls twostage+pairs twostage+pairs+group3 twostage+nopairs+group3 \
   --deadline-s 150 --out $R/kbg/gdn.json > $R/kbg.out 2>&1
echo "kbg rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 120 bash scripts/gpu_run.sh --here --out $R/kbu bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 16 --budgets 16 32 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s 100 --out $R/kbu/gdn.json > $R/kbu.out 2>&1
echo "kbu rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kbl bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 64 --budgets 16 32 128 256 --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s $(( 560 - $(date +%s) + t0 )) --out $R/kbl/gdn.json > $R/kbl.out 2>&1
echo "kbl rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest kbg kbu kbl && rm -rf prep
