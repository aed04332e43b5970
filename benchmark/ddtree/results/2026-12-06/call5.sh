#!/bin/bash
# Prepared, not run (nvidia-h200, ~9 min): issue 29 at the current step (the GatedDeltaNet
# projections read in place, compat/gdn_views.py). (g) the gated norm alone at 27B's shape: sglang's
# copy + norm against kernels/gated_norm.py per head block (bench_gated_norm.py; in the 2026-12-06
# H100 profile ours cost 2.9 us a layer against sglang's 2.1); (a) DFLASH and DDTREE-16 side by side
# at 1 and 16 requests, the settings of results/2026-12-04b/call1 (27B shapes, dummy weights,
# context 8192, 512-token prompts, graphs + overlap, wy, triton, decode graphs [1, 16], two timed
# rounds), --phases --profile. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout 60 bash scripts/gpu_run.sh --here --out $R/g bench benchmark/ddtree/bench_gated_norm.py \
  --out $R/gated_norm.json > $R/g.out 2>&1
echo "g rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; grep "\[gated_norm\]" $R/g.out >> $R/rc.txt
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases --profile \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 240 --configs DDTREE-16 DFLASH \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a $R/g
cat $R/rc.txt
