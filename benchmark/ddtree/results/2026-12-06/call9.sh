#!/bin/bash
# Any kind (ran on the warm H100 after call8), ~3 min: the tiny Llama's soak in float32 (the same
# route and TRITON_F32_DEFAULT=ieee as call8), the sharp check beside its bf16 soak of 2026-12-04b.
R=${OUT:?}
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 290 bash scripts/gpu_run.sh --here --out $R/run bench benchmark/ddtree/soak.py --model llama --dtype float32 \
  --device cuda --requests 2000 --concurrency 32 --seed 0 --timeout-s 200 --request-timeout-s 60 --idle-timeout-s 30 \
  --out $R/soak-llama-fp32.json > $R/soak.out 2>&1
echo "soak rc=$?" > $R/rc.txt; tail -2 $R/soak.out >> $R/rc.txt
grep -rn -A30 "Traceback (most recent call last)" $R/soak.out $R/soak-*-work 2>/dev/null | head -200 > $R/errors.txt
cd $R && tar czf res.tgz soak.out soak-*-work 2>/dev/null; rm -rf prep prep.out run soak-*-work; cat rc.txt
