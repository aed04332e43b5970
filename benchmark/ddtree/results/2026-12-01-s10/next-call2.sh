#!/bin/bash
# Prepared in session 10 (not run yet), device call 2 (nvidia-h200), alone on the GPU: budget auto
# at concurrency 4, the one of issue 7's concurrencies (besides 64) where auto was not yet shown
# beside the better fixed choice in one call with rounds (session 10 call 2 did 1 and 16):
# budget 16, chain, auto, three timed rounds each, 128 decoded tokens.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DDTREE-16 DDTREE-chain DDTREE-auto \
  --concurrency 4 --prompt-len 512 --decode-tokens 128 --rounds 3 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 480 --case-timeout-s 240 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
