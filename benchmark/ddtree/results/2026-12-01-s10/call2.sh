#!/bin/bash
# Run in session 10 as device call 2 (commit 7078114); the lines below are the session-9 preparation.
# Prepared in session 9 for the next session (not run yet), device call 2 (nvidia-h200), alone on
# the GPU: issue 7's budget-auto question where session 9's call 3 stopped — concurrency 16 —
# and a second run of concurrency 1, the chain, budget 16 and auto side by side (128 decoded
# tokens), three timed rounds per engine (step_cost.py --rounds): the spread inside one engine and
# between engines beside auto's margin.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DDTREE-16 DDTREE-chain DDTREE-auto \
  --concurrency 16 1 --prompt-len 512 --decode-tokens 128 --rounds 3 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 480 --case-timeout-s 260 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
