#!/bin/bash
# Prepared in session 9 (not run yet), device call 4 (nvidia-h200), alone on the GPU: the 27B rows
# issue 7's sweep still lacks at the session-9 defaults — no speculation, DFLASH, budgets 8, 32,
# 128 and 256 — at concurrency 1/4/16/64, 32 decoded tokens (the engines start in ~50-150 s each,
# so the deadline may leave the last configurations for another call; it records which).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 580 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs no-spec DFLASH DDTREE-8 DDTREE-32 DDTREE-128 DDTREE-256 \
  --concurrency 1 4 16 64 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 480 --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
