#!/bin/bash
# Session 9, device call 3 (prepared in session 8 as next-call1.sh), run with the session-9 defaults (bf16x3, new auto rule) (nvidia-h200), alone on
# the GPU: issue 7's budget-auto question at 27B with the session-8 verify (twostage): the chain,
# budgets 16 and 64, then auto over them, 128 decoded tokens, concurrency 1/4/16. Session 8's
# call 4 lost the chain to a 150 s case limit (the first engine compiles Triton kernels cold):
# 260 s here.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 580 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DDTREE-64 DDTREE-auto \
  --concurrency 1 4 16 --prompt-len 512 --decode-tokens 128 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 480 --case-timeout-s 260 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
