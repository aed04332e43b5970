#!/bin/bash
# Prepared in session 11, kept in session 12 (not run yet), device call (nvidia-h200), alone on the GPU: issue 7 at
# 64 requests with budget auto's chain candidate (session 11 call 4: the chain's row was measured
# — 125.8 ms a step vs budget 16's 144.6 — but its engine's shutdown outlasted the case limit and
# the table dropped it, so auto could only pick 16; step_cost now keeps such rows). Case limit
# 260 s for the cold first engine.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DDTREE-auto --concurrency 64 --rounds 2 \
  --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --engine-arg 'cuda_graph_bs_decode=[64]' \
  --deadline-s $(( 520 - $(date +%s) + t0 )) --case-timeout-s 260 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
