#!/bin/bash
# Prepared in session 10, carried over by session 11 (not run yet), device call 4 (nvidia-h200), alone on the GPU: where a
# 27B decode step's device time goes, by kernel, for the chain through DDTREE's worker, budget 16
# and sglang's DFLASH (step_cost.py --profile: two traced passes per concurrency, differenced per
# kernel; untimed), at 16 and 1 requests, 32 decoded tokens. Session 10 call 2: DDTREE-16 costs
# 46.15 ms a step at 16 requests vs the chain's 42.63 — the kernel tables say where the 3.5 ms
# go, and how much of a step is not device time at all (ms_per_step minus profile.ms_per_step).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DFLASH --concurrency 16 1 --max-concurrency DFLASH=16 \
  --prompt-len 512 --decode-tokens 32 --profile --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --deadline-s 420 --case-timeout-s 240 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
