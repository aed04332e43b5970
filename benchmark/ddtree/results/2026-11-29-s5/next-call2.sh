#!/bin/bash
# Prepared for the next session (not run yet), device call 2 (nvidia-h200): step cost at
# Qwen3.6-27B size with the default graph tree verify, wy mode (only if call 1 shows wy
# lossless; else drop the --ddtree-arg and the budgets above 64), concurrency 1/4/16, then the
# budget policy over the sweep's own table (rows before it), then no-spec and 128 if time is
# left (~90 s per configuration: expect the deadline to cut the tail; split over two calls if
# needed). Nothing else on the GPU while it times.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 580 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DFLASH DDTREE-16 DDTREE-32 DDTREE-64 \
  DDTREE-chain DDTREE-auto no-spec DDTREE-128 --concurrency 1 4 16 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 480 --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf sc prep
