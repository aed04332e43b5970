#!/bin/bash
# Issue 29 (step cost, side by side) and issue 32 (budget auto's table on this card): DFLASH and
# DDTREE-16 / chain / 64 in one step_cost.py sweep, Qwen3.6-27B shapes, dummy weights, triton,
# graphs + overlap, wy, context 8192, 512-token prompts, 1 / 4 / 16 requests, --phases.
# Configurations in order of importance; none starts after 420 s of the sweep. Carry the bundle
# (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 580 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 4 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --deadline-s 420 \
  --configs DDTREE-16 DFLASH DDTREE-chain DDTREE-64 --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-300 >> $R/rc.txt
tail -n 30 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
