#!/bin/bash
# Session 14 call 4 (device, nvidia-h200), what the session's device time still holds: issue 7 item
# 2's sweep, DDTREE-64, -128, -256 (256 capped at 16 requests), then the chain again as the anchor
# between calls, at 1 / 4 / 16 / 64 requests; rows are saved as they finish.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 430 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-64 DDTREE-128 DDTREE-256 DDTREE-chain --concurrency 1 4 16 64 \
  --max-concurrency DDTREE-256=16 --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 370 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
