#!/bin/bash
# Run on the warm nvidia-h100-x1 right after call11: budget 15 against 16 at 16 requests (no
# DFLASH: it does not start sized for 16 on an H100 at 27B shapes). Carry the bundle.
R=${OUT:?}
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout 290 bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py --models /tmp/qwen36 \
  --concurrency 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --configs DDTREE-15 DDTREE-16 \
  --out $R/step_cost.json > $R/a.out 2>&1
echo rc=$?; grep -h "\[step_cost\]" $R/a.out | cut -c1-300; rm -rf $R/a $R/prep
