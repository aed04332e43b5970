#!/bin/bash
# Prepared, not run (any kind, ~9.5 min): (a) issue 31's float32 hybrid soak with both of
# sglang's float32 blockers routed (call2.sh's command: the conv state pool in float32, the chunked
# GatedDeltaNet prefill run in bf16 by the test plugin), greedy output held to no speculation at
# the float32 tolerance; (b) beside it, the GPU smoke suite at the current defaults (issue 29:
# lossless with compat/gdn_views.py, whose wy verifies read the GatedDeltaNet projections in place;
# the wy smoke cases run through it). Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
(timeout $(( 545 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-qwen35 bench benchmark/ddtree/soak.py \
   --model qwen35 --dtype float32 --device cuda --requests 2000 --concurrency 32 --seed 0 --timeout-s 280 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-qwen35-fp32.json > $R/soak.out 2>&1
 echo "soak rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -3 $R/soak.out >> $R/rc.txt) &
SGLANG_DDTREE_GPU_PARALLEL=8 SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout $(( 550 - $(date +%s) + t0 )) \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
wait
grep -rn -A40 "Traceback (most recent call last)" $R/soak.out $R/soak-*-work 2>/dev/null | head -300 > $R/errors.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak.out soak-*-work smoke 2>/dev/null; rm -rf prep prep.out run-* soak-*-work smoke
cat $R/rc.txt
