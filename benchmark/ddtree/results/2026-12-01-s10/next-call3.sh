#!/bin/bash
# Prepared in session 10 (not run yet), device call 3 (nvidia-h200), alone on the GPU: the 27B
# rows at the largest budgets (128, 256; the kernel grid says they only fit low concurrency) at
# 1/4/16, then budget 16 at 64 requests (each engine is sized for its largest concurrency: a
# 64-request DDTREE engine captured past 200 s in session 10, so it gets its own long limit).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
COMMON=(--models /tmp/qwen36 --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"'
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"'
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"')
timeout $(( 300 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  "${COMMON[@]}" --configs DDTREE-128 DDTREE-256 --concurrency 1 4 16 --deadline-s 150 --case-timeout-s 200 \
  --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc64 bench benchmark/ddtree/step_cost.py \
  "${COMMON[@]}" --configs DDTREE-16 --concurrency 64 --case-timeout-s 270 --out $R/sc64/step_cost.json > $R/sc64.out 2>&1
echo "step_cost64 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc sc64 prep && rm -rf prep
