#!/bin/bash
# Any kind, ~5 min: call7's float32 hybrid soak again with Triton's float32 dots in IEEE float32 in
# both servers (soak.dtype_env: TRITON_F32_DEFAULT=ieee; call7's 3 mismatches were output log-probs
# 0.012-0.02 nats apart, the order of TF32 rounding in sglang's decode attention dots).
# Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 540 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-qwen35 bench benchmark/ddtree/soak.py \
   --model qwen35 --dtype float32 --device cuda --requests 2000 --concurrency 32 --seed 0 --timeout-s 280 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-qwen35-fp32.json > $R/soak.out 2>&1
echo "soak rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -3 $R/soak.out >> $R/rc.txt
grep -rn -A40 "Traceback (most recent call last)" $R/soak.out $R/soak-*-work 2>/dev/null | head -300 > $R/errors.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak.out soak-*-work 2>/dev/null; rm -rf prep prep.out run-* soak-*-work
cat $R/rc.txt
