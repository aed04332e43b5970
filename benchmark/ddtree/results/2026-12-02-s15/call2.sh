#!/bin/bash
# Prepared in session 14 (not run), device call (nvidia-h200), alone on the GPU, ~9.5 min: issue 7
# item 2's sweep, part A — the chain (the anchor between calls), budget 8 again (the CUDA tree
# builder now serves it: session 14 measured 34.2 ms at one request through the torch builder),
# budgets 64 and 128 (out of memory at graph capture in session 14; now with sglang's automatic
# --mem-fraction-static less DDTREE's verify reserve, and no GPU memory held by the sweep's parent),
# at 1 / 4 / 16 / 64 requests. Engines take 40-106 s to start (session 14).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-8 DDTREE-64 DDTREE-128 --concurrency 1 4 16 64 \
  --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 450 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/sc/step_cost.json /tmp/partA_step_cost.json 2>/dev/null
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
