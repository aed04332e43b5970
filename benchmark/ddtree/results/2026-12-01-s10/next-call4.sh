#!/bin/bash
# Prepared in session 10 (not run yet), device call 4 (nvidia-h200), alone on the GPU: issue 7's
# largest budgets, 128 and 256, at 1/4/16 requests (the kernel grid, session 10 call 3, has their
# GDN verify alone at 4.4-11 ms for one request and 46-115 ms for 16), 32 decoded tokens.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-128 DDTREE-256 --concurrency 16 4 1 \
  --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --deadline-s 420 --case-timeout-s 250 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
