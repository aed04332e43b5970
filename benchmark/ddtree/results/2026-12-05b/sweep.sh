#!/bin/bash
# nvidia-h200 (DFLASH at 16 requests needs more than an H100's 80 GB at 27B shapes), ~9.5 min.
# One step-cost sweep for two issues: issue 29's side-by-side (DFLASH against DDTREE-16, the chain
# and DDTREE-64, same engine settings, same GPU) and issue 32's budget-auto table at the current
# commit (the budgets auto chooses from at 1 / 4 / 16 requests). 27B shapes, dummy weights, triton,
# graphs + overlap, wy, context 8192, 512-token prompts, two timed rounds (the lower reported),
# --phases. Configurations run in this order; none starts after 430 s into the sweep.
# Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 4 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --deadline-s $(( 430 - $(date +%s) + t0 )) \
  --configs DFLASH DDTREE-16 DDTREE-chain DDTREE-64 DDTREE-32 --max-concurrency DFLASH=16 \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-300 >> $R/rc.txt
tail -n 30 $R/a.out > $R/tail.txt; xz $R/a.out
rm -rf $R/prep $R/a
cat $R/rc.txt
