#!/bin/bash
# Prepared in session 15 (not run), device call (nvidia-h200), alone on the GPU, ~8.5 min:
# (a) engine cases, lossless vs plain: budget auto on the tiny hybrid (wy) with its widths' graphs
#     captured only up to the batch sizes the policy can pick them at (session 15's
#     policy_width_caps + the ModelRunner.init_cuda_graphs hook): the existing table (budget 32 up
#     to 4 requests) and the capped one (budget 32 measured at one request only);
# (b) issue 6's remaining upstream cells beside ours, --defaults-only, upstream's tree conv only
#     up to 65 nodes (it compiles unrolled over the nodes: 257 did not finish in ~400 s, sessions
#     13 and 15); above, upstream's GDN kernel alone beside ours' GDN alone. 64x256 is skipped
#     for upstream's memory (48 GiB of snapshots for one layer) and kept for ours.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=170 timeout 180 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 3 \
   --only plain-qwen35,ddtree-auto-qwen35-wy,ddtree-auto-capped-qwen35-wy > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "target verify graphs for width\|CUDA graphs for widths" $R/cases/cases/ddtree-auto*.log >> $R/rc.txt 2>/dev/null
timeout $(( 500 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --cases 16xchain 16x16 16x32 16x64 64xchain 64x16 64x32 64x64 4x128 16x128 64x128 1x256 4x256 16x256 64x256 \
   --defaults-only --upstream-conv-max-nodes 65 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s $(( 470 - $(date +%s) + t0 )) --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep cases kb && rm -rf prep cases
