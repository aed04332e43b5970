#!/bin/bash
# Any one-GPU kind (an H100 for the shipped table), ~9.5 min; after call1.sh where its engine A/B
# showed a gain. Issue 29's one-request ratios with the L2 prefetch: sglang's DFLASH, DDTREE-15 and
# DDTREE-64 without and with SGLANG_DDTREE_L2_PREFETCH=P (default 16 MiB; at 65 tokens most
# products are cuBLAS's and ask from a kernel of their own), the chain with it,
# results/2026-12-07/call5.sh's settings (27B shapes, dummy weights, triton, graphs + overlap, wy,
# context 8192, 512-token prompts, 3 rounds of 64 tokens, --phases). Carry the bundle.
R=${OUT:?}
P=${P:-16}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 580 - $(el) )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 64 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg max_running_requests=1 --engine-arg context_length=8192 --case-timeout-s 200 \
  --configs DFLASH DDTREE-15@2 DDTREE-64@2 DDTREE-chain@2 DDTREE-15 DDTREE-64 \
  --config-env DDTREE-15@2:SGLANG_DDTREE_L2_PREFETCH=$P --config-env DDTREE-64@2:SGLANG_DDTREE_L2_PREFETCH=$P \
  --config-env DDTREE-chain@2:SGLANG_DDTREE_L2_PREFETCH=$P \
  --deadline-s $(( 470 - $(el) )) --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(el) s" > $R/rc.txt
cp $R/a/step_cost*.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
cd $R && tar cJf logs.tar.xz a.out prep.out shapes.out 2>/dev/null; rm -rf prep a a.out prep.out shapes.out
cat $R/rc.txt
