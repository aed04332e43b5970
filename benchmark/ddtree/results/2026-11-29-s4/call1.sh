#!/bin/bash
# Session 4, device call 1 (nvidia-h200): the whole GPU smoke suite (every case of
# test/srt/gpu_cases.py, 10 engines at a time) beside the GPU kernel tests.
R=${OUT:?}
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $R/gpu.txt 2>&1
(SGLANG_DDTREE_GPU_PARALLEL=10 SGLANG_DDTREE_GPU_CASE_TIMEOUT=420 timeout 540 \
   bash scripts/gpu_run.sh --here --out $R/smoke test test/srt/test_gpu_smoke.py > $R/smoke.out 2>&1
 echo "smoke rc=$?" >> $R/rc.txt) &
(sleep 5; timeout 420 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py \
   test/core/test_gpu_core.py test/srt/test_upstream_tree_linear_gpu.py > $R/ktest.out 2>&1
 echo "ktest rc=$?" >> $R/rc.txt) &
wait
cd $R && tar czf res.tgz --exclude=res.tgz smoke ktest prep && rm -rf smoke ktest prep
