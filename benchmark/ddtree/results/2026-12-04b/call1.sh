#!/bin/bash
# Prepared, not run (nvidia-h200, ~6 min): issue 29's per-phase table, DFLASH and DDTREE-16 side
# by side: --profile (device time per kernel category and phase from two traced passes, launches
# per step) and --phases (DDTREE) at 1 and 16 requests, triton, same shapes and settings as call3.
# (No DFLASH profile exists yet: the one of 2026-12-03-profile/call1 was cut by its call's limit.)
# Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases --profile \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 240 --configs DFLASH DDTREE-16 \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
