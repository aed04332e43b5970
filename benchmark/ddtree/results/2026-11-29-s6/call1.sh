#!/bin/bash
# Session 6, device call 1 (nvidia-h200; prepared in session 5 as next-call1.sh): the smoke suite at
# the graph-verify default, the wy cases after the conv-rounding fix, and the GPU tests that pin wy
# to sglang's per-node kernels.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
(SGLANG_DDTREE_GPU_PARALLEL=9 SGLANG_DDTREE_GPU_CASE_TIMEOUT=400 timeout 545 \
   bash scripts/gpu_run.sh --here --out $R/smoke test test/srt/test_gpu_smoke.py > $R/smoke.out 2>&1
 echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
(sleep 20; SGLANG_DDTREE_GPU_CASE_TIMEOUT=400 timeout 520 bash scripts/gpu_run.sh --here --out $R/preview cases \
   --parallel 5 --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree128-qwen35-wy,ddtree15-qwen35-wy-oracle-first,ddtree16-qwen35-wy-oracle-sibling,ddtree32-qwen35-wy-graphs,ddtree16-qwen35-wy-oracle-sibling-graphs,ddtree8-qwen35-wy-check,ddtree16-llama-oracle-sibling-graphs-nomask \
   > $R/preview.out 2>&1; echo "preview rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
(sleep 40; timeout 480 bash scripts/gpu_run.sh --here --out $R/ktest test test/srt/test_upstream_tree_linear_gpu.py \
   test/core/test_gdn_tree_triton.py -k "not interpreter" > $R/ktest.out 2>&1
 echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
wait
cd $R && tar czf res.tgz --exclude=res.tgz smoke preview ktest prep && rm -rf smoke preview ktest prep
