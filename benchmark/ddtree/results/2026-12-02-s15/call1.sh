#!/bin/bash
# Prepared in session 14 (not run), device call (nvidia-h200), alone on the GPU, ~7.5 min:
# (a) GPU test of session 14's padded layout: the CUDA tree builder's budget + 1 layout padded to
#     a wider verify width equals the torch layout of the padded tree (test_gpu_core);
# (b) engine cases, lossless vs plain: budget 8 (verify width 16 = the draft block: the CUDA
#     builder + padding now serve it) on the tiny Llama and the tiny hybrid (wy, graphs), and
#     budget auto on the hybrid in wy mode (widths 16 and 33 now carve their commit inputs from one
#     storage);
# (c) issue 6's upstream cells no run reached, --defaults-only (ours as the engine runs it beside
#     upstream from a graph; with the A/B timings a cell took ~100 s, session 14 call 1).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 100 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gpu_core.py -q -k "cuda_tree_kernels" \
   > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=170 timeout 180 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 5 \
   --only plain-llama,plain-qwen35,ddtree8-llama-graphs,ddtree8-qwen35-wy,ddtree-auto-qwen35-wy > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 450 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --cases 1x256 16x64 4x128 16x128 64xchain 64x16 64x32 64x64 4x256 16x256 64x128 --defaults-only \
   --precision bf16x3 --alt-precisions --alt-impls --deadline-s $(( 420 - $(date +%s) + t0 )) \
   --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep ktest cases kb && rm -rf prep cases
