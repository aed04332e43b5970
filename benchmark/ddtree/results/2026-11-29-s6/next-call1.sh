#!/bin/bash
# Prepared in session 6 for the next session (not run yet), device call 1 (nvidia-h200): the wy
# cases again (the commit became two launches over stacked buffers after session 6's GPU runs,
# commit 872849a), and the new GPU cases — budget auto with per-width verify graphs (every step
# must replay a graph, both widths used), the radix-cache reruns (snapshot, and wy behind
# SGLANG_DDTREE_WY_RADIX=1).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=400 timeout 545 bash scripts/gpu_run.sh --here --out $R/preview cases --parallel 9 \
   --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree16-qwen35-wy-oracle-sibling,ddtree16-qwen35-wy-oracle-sibling-graphs,ddtree8-qwen35-wy-check,ddtree-auto-llama,ddtree-auto-qwen35,ddtree-auto-qwen35-wy,ddtree8-qwen35-radix,ddtree8-qwen35-wy-radix \
   > $R/preview.out 2>&1
echo "preview rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 test/srt/gpu_cases.py check --out $R/preview/cases > $R/preview-check.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz preview prep && rm -rf preview prep
