#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min): issue 29 at the current defaults (split-KV tree
# attention, conv input copy): DDTREE-16, DFLASH, the DDTREE chain and DDTREE-64 at 1, 4 and 16
# requests (DDTREE at 64 too), Qwen3.6-27B shapes, dummy weights, context 8192, 512-token
# prompts, graphs + overlap, --phases. Carry build/bundle/sglang-ddtree-bundle.tar.xz (assets'
# drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 DFLASH DDTREE-chain DDTREE-64 --concurrency 1 4 16 64 \
  --max-concurrency DFLASH=16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases --deadline-s 430 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --engine-arg context_length=8192 --case-timeout-s 240 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/sc/step_cost.json $R/ 2>/dev/null; grep "\[step_cost\]" $R/sc.out | cut -c1-500 >> $R/rc.txt; rm -rf $R/prep $R/sc
