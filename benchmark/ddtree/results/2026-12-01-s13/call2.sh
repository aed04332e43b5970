#!/bin/bash
# Prepared in session 12 (not run: no device lent after call 2), next device call (session 11's next-call2.sh; the defaults of session 12: fast verify products, CUDA commit) (nvidia-h200), alone on the GPU: issue 7's
# noise question at 4 requests. Session 11 call 2 had budget auto 0.8 ms (3.5%) a step above the
# chain although it chose the chain on 385 of 387 steps; the spread between engines of one
# configuration was never measured. Chain and auto twice each, alternating, in engines of their
# own (step_cost.py CONFIG@N), budget 16 for auto's table; three rounds, 128 decoded tokens.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 \
  --configs DDTREE-16 DDTREE-chain DDTREE-auto DDTREE-chain@2 DDTREE-auto@2 \
  --concurrency 4 --prompt-len 512 --decode-tokens 128 --rounds 3 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s $(( 540 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/auto_verdict.py $R/sc/step_cost.json --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
