#!/bin/bash
# Session 5, device call A (nvidia-h200): the GPU smoke suite as one pytest run (issue 4's
# record), beside the previews that matter next (wy mode, graph verify on both targets) as
# case records, and the GPU kernel tests (without the Triton-interpreter test, CPU-only).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep $(( $(date +%s) - t0 )) s" >> $R/rc.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $R/gpu.txt 2>&1
(SGLANG_DDTREE_GPU_PARALLEL=9 SGLANG_DDTREE_GPU_CASE_TIMEOUT=400 timeout 545 \
   bash scripts/gpu_run.sh --here --out $R/smoke test test/srt/test_gpu_smoke.py > $R/smoke.out 2>&1
 echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
(sleep 20; SGLANG_DDTREE_GPU_CASE_TIMEOUT=400 timeout 520 bash scripts/gpu_run.sh --here --out $R/preview cases \
   --parallel 5 --only ddtree8-qwen35-wy,ddtree32-qwen35-wy,ddtree8-llama-graphs,ddtree128-qwen35-wy,ddtree32-qwen35-wy-graphs,ddtree128-llama-graphs,ddtree16-qwen35-wy-oracle-sibling,ddtree15-qwen35-wy-oracle-first,ddtree16-qwen35-oracle-sibling-graphs,ddtree16-qwen35-wy-oracle-sibling-graphs \
   > $R/preview.out 2>&1
 echo "preview rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
(sleep 40; timeout 480 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py \
   test/core/test_cuda_prebuilt.py test/core/test_gpu_core.py -k "not interpreter" --durations=15 > $R/ktest.out 2>&1
 echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
wait
cd $R && tar czf res.tgz --exclude=res.tgz smoke preview ktest prep && rm -rf smoke preview ktest prep
