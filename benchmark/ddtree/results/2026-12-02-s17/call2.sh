#!/bin/bash
# Prepared in session 16 (not run), device call (nvidia-h200), ~6 min: budget auto on the tiny
# hybrid (wy) lossless vs plain, with its widths' graphs captured only up to the batch sizes the
# policy can pick them at (the existing table, and one with budget 32 measured at one request
# only). Session 16 call 1's run had three engines start at once on a fresh machine (85-110 s of
# Triton compile each) and stopped them at 180 s: three at once again with 290 s each.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=290 timeout 330 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 3 \
   --only plain-qwen35,ddtree-auto-qwen35-wy,ddtree-auto-capped-qwen35-wy > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "target verify graphs for width\|Capture target verify CUDA graph begin" $R/cases/cases/ddtree-auto*.log | cut -c1-200 >> $R/rc.txt 2>/dev/null
cd $R && tar czf res.tgz --exclude=res.tgz prep cases && rm -rf prep
