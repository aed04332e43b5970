#!/bin/bash
# Prepared in session 6 for the next session (not run yet), device call 1 (nvidia-h200): the new
# GPU cases — budget auto with per-width verify graphs (every step must replay a graph, both
# widths used), the radix-cache reruns (snapshot, and wy behind SGLANG_DDTREE_WY_RADIX=1) — and,
# after them, the tree-GDN kernel at Qwen3.6-27B shapes for the table.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=380 timeout 420 bash scripts/gpu_run.sh --here --out $R/preview cases \
   --parallel 7 --only ddtree-auto-llama,ddtree-auto-qwen35,ddtree-auto-qwen35-wy,ddtree8-qwen35-radix,ddtree8-qwen35-wy-radix \
   > $R/preview.out 2>&1
echo "preview rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
# After the engines (a kernel timed beside compiling engines is not a measurement).
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 16 --budgets 16 64 --alt-precisions tf32 --deadline-s 100 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 test/srt/gpu_cases.py check --out $R/preview/cases > $R/preview-check.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz preview kbench prep && rm -rf preview kbench prep
