#!/bin/bash
# Prepared in session 13 (not run), device call (nvidia-h200), alone on the GPU, ~8 min: issue 7
# item 2's sweep, part 3 of 3 — the chain again (the anchor between parts), DDTREE-64, -128 and
# -256 (256 capped at 16 requests: 64 x 257 verify rows, their logits and wy scratch), at 1 / 4 /
# 16 / 64 requests.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 500 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-64 DDTREE-128 DDTREE-256 --concurrency 1 4 16 64 \
  --max-concurrency DDTREE-256=16 --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 420 - $(date +%s) + t0 )) --case-timeout-s 220 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
