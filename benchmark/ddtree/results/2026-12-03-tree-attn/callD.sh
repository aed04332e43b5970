#!/bin/bash
# nvidia-h200 (warm after callB), ~4 min: DDTREE-16 (split-KV tree attention, the conv that copies
# its input) against sglang's DFLASH at Qwen3.6-27B shapes, dummy weights, context 8192, graphs +
# overlap, 4096-token prompts, 1 and 16 requests, --phases. Run inline through the device tool.
R=$OUT; bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout 500 bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py --models /tmp/qwen36 \
  --configs DDTREE-16 DFLASH --concurrency 1 16 --rounds 2 --prompt-len 4096 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 250 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo rc=$? > $R/rc.txt; cp $R/sc/step_cost.json $R/; grep "\[step_cost\]" $R/sc.out | cut -c1-600 >> $R/rc.txt
