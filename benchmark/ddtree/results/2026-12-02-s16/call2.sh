#!/bin/bash
# Prepared in session 15 (not run), device call (nvidia-h200), alone on the GPU, ~9.5 min: issue 7's
# sweep part C at --context-length 8192 (as session 15 call 3): the chain (this context's anchor:
# call 3's chain stopped after 4 requests), DFLASH and budget 256 (both capped at 16 requests).
# The first engine on a fresh machine took 149 s to start (Triton compile): case limit 260 s.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DFLASH DDTREE-256 --concurrency 1 4 16 64 \
  --max-concurrency DFLASH=16 --max-concurrency DDTREE-256=16 \
  --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' --engine-arg context_length=8192 \
  --deadline-s $(( 470 - $(date +%s) + t0 )) --case-timeout-s 260 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/sc/step_cost.json /tmp/partC_step_cost.json 2>/dev/null
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
