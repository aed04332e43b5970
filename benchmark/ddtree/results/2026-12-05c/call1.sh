#!/bin/bash
# Issue 31: the tiny hybrid's soak in float32 on CUDA, the test plugin's float32 route now covering
# RMSNorm (the DFlash drafter's), GemmaRMSNorm and RotaryEmbedding (SGLANG_DDTREE_TEST_FP32_NORMS,
# set by soak.py); greedy output held to no speculation at the float32 tolerance. The earlier try
# (route on GemmaRMSNorm alone) ended with a traceback after 189 s whose log was lost. Server
# tracebacks are copied to errors.txt. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-qwen35 bench benchmark/ddtree/soak.py \
   --model qwen35 --dtype float32 --device cuda --requests 1500 --concurrency 32 --seed 0 --timeout-s 330 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-qwen35-fp32.json > $R/soak.out 2>&1
echo "soak rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -3 $R/soak.out >> $R/rc.txt
grep -rn -A40 "Traceback (most recent call last)" $R/soak.out $R/soak-*-work 2>/dev/null | head -300 > $R/errors.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak.out soak-*-work 2>/dev/null; rm -rf prep prep.out run-* soak-*-work
cat $R/rc.txt
