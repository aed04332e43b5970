#!/bin/bash
# Prepared in session 13 (not run), device call (nvidia-h200), alone on the GPU, ~7.5 min: issue 7
# item 2's step-cost sweep at the current defaults, part 1 of 3 — no speculation, the chain through
# DDTREE's worker, the DFLASH chain (capped at 16 requests: sglang's DFLASH cannot allocate its
# per-token GDN scratch for 64 requests of the 27B on one H200, session 10), DDTREE-16, at 1 / 4 /
# 16 / 64 requests; decode graphs for exactly those batch sizes (graph capture is what stopped
# session 10's sweep); two timed rounds per concurrency.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 450 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs no-spec DDTREE-chain DFLASH DDTREE-16 --concurrency 1 4 16 64 \
  --max-concurrency DFLASH=16 --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 365 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
