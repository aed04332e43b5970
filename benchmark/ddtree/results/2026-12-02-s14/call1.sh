#!/bin/bash
# Prepared in session 13 (not run), device call (nvidia-h200), alone on the GPU, ~5 min: issue 6's
# table cells with upstream that no run reached (bs 1 at 256; bs 4 at 64 / 128 / 256; bs 16 at
# 64 / 128 / 256; bs 64 chain .. 128 — bs 64 at 256 needs 48 GiB of snapshots for one layer and is
# skipped by the bench), ours at the defaults beside upstream in one run; no alternatives.
# Cases run in the order given (the issue's own table cells first) and stop at the deadline (rows saved as they finish).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout $(( 240 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --cases 4x64 1x256 16x64 4x128 16x128 64xchain 64x16 64x32 64x64 4x256 16x256 64x128 \
   --precision bf16x3 --alt-precisions --alt-impls --deadline-s $(( 210 - $(date +%s) + t0 )) \
   --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz kb prep && rm -rf prep
