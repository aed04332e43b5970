#!/bin/bash
# Session 15 call 3 (nvidia-h200), alone on the GPU, ~9.5 min: issue 7's sweep, budgets 64 / 128
# (out of memory at graph capture in sessions 14 and 15 call 2) and 256 (capped at 16 requests),
# beside the chain as this part's anchor, at 1 / 4 / 16 / 64 requests, after the verify reserve
# counts the attention backend's graph buffers and the lm_head output (compat/verify_memory.py).
# Every configuration at --context-length 8192: triton's verify graph buffers hold int64 KV
# indices and a mask over the whole context per verify position (2.4 MB at the 27B's 262144);
# at 64 requests x 129 positions that alone is 19.5 GB and leaves the KV pool too small for the
# sweep's 64 x 700 tokens. The context length does not change a step's work here.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-64 DDTREE-128 DDTREE-256 --concurrency 1 4 16 64 \
  --max-concurrency DDTREE-256=16 \
  --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' --engine-arg context_length=8192 \
  --deadline-s $(( 540 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
