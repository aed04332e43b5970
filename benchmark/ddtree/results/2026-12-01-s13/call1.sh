#!/bin/bash
# Prepared in session 12 (not run yet), device call (nvidia-h200), alone on the GPU, short (~6.5 min):
# issue 6's table cells with upstream that no run of session 12 reached — bs 1 at budgets 64 / 128 /
# 256 and bs 4 at budget 64, ours beside upstream in one run at the final defaults (upstream skips
# shapes whose per-node snapshots pass 40 GiB: bs 4 at 128 / 256).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
# The CUDA commit after its template clean-up (0539a23: compile-checked only).
timeout 90 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q \
   -k "cuda_from_x or cuda_commit" > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 390 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 --budgets 64 128 256 --no-chain --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s $(( 360 - $(date +%s) + t0 )) --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz ktest kb prep && rm -rf prep
