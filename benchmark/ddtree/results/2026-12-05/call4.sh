#!/bin/bash
# Issue 31, short form of call3 (the device time left after failed starts): the tiny hybrid's soak
# in float32 on CUDA (GemmaRMSNorm through sglang's native path: SGLANG_DDTREE_TEST_FP32_NORMS,
# set by soak.py), 1000 requests, greedy output held to no speculation at the float32 tolerance.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 390 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-qwen35 bench benchmark/ddtree/soak.py \
   --model qwen35 --dtype float32 --device cuda --requests 1000 --concurrency 32 --seed 0 --timeout-s 330 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-qwen35-fp32.json > $R/soak.out 2>&1
echo "soak rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -1 $R/soak.out >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak.out soak-*-work 2>/dev/null; rm -rf prep prep.out run-* soak-*-work
cat $R/rc.txt
