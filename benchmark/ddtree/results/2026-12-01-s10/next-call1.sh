#!/bin/bash
# Prepared in session 10 for the next session (not run yet), device call 1 (nvidia-h200), alone on
# the GPU: issue 7's 27B rows still missing with the current kernels — DFLASH (capped at 16
# requests: it cannot allocate 64 of the 27B on one H200), budgets 8 and 32 — at concurrency
# 16/4/1, 32 decoded tokens (no-spec at 1/4/16/64 was measured in session 10 call 3).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DFLASH DDTREE-32 DDTREE-8 \
  --concurrency 16 4 1 --max-concurrency DFLASH=16 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 420 --case-timeout-s 240 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
