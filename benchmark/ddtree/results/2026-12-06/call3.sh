#!/bin/bash
# Issue 31: call2.sh cut to the device time left (800 requests, 175 s): the tiny hybrid's soak in float32 on CUDA (any kind),
# with the hybrid's conv state pool in float32 too (soak.py dtype_env now sets sglang's
# SGLANG_MAMBA_CONV_DTYPE: with the default bf16 pool, sglang's prefill conv kernel failed to
# compile in both servers, 2026-12-06; then sglang's chunked GatedDeltaNet prefill refused float32, now run in
# bf16 by the test plugin's float32 route). Greedy output held to no speculation at the float32
# tolerance. Server tracebacks are copied to errors.txt. Carry the bundle.
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 175 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-qwen35 bench benchmark/ddtree/soak.py \
   --model qwen35 --dtype float32 --device cuda --requests 800 --concurrency 32 --seed 0 --timeout-s 80 \
   --request-timeout-s 60 --idle-timeout-s 20 --serial-check 16 --out $R/soak-qwen35-fp32.json > $R/soak.out 2>&1
echo "soak rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -3 $R/soak.out >> $R/rc.txt
grep -rn -A40 "Traceback (most recent call last)" $R/soak.out $R/soak-*-work 2>/dev/null | head -300 > $R/errors.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak.out soak-*-work 2>/dev/null; rm -rf prep prep.out run-* soak-*-work
cat $R/rc.txt
