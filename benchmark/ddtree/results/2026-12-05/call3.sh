#!/bin/bash
# Issue 31: (a) the tiny hybrid's soak in float32 on CUDA (GemmaRMSNorm through sglang's native
# path: SGLANG_DDTREE_TEST_FP32_NORMS, set by soak.py), greedy output held to no speculation at
# the float32 tolerance; (b) beside it, the GPU smoke suite (the grammar cases after
# verify_info.apply_grammar's rewrite, and the 0.5.17 CUDA path after the release-keyed argument
# reads). Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
(timeout $(( 545 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-qwen35 bench benchmark/ddtree/soak.py \
   --model qwen35 --dtype float32 --device cuda --requests 2000 --concurrency 32 --seed 0 --timeout-s 280 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-qwen35-fp32.json > $R/soak.out 2>&1
 echo "soak rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -1 $R/soak.out >> $R/rc.txt) &
SGLANG_DDTREE_GPU_PARALLEL=8 SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout $(( 550 - $(date +%s) + t0 )) \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz soak.out soak-*-work smoke 2>/dev/null; rm -rf prep prep.out run-* soak-*-work smoke
cat $R/rc.txt
