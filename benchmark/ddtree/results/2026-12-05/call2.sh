#!/bin/bash
# Issue 29 at one request, side by side, on an H100 (80 GB): call1's DFLASH could not start at 16
# requests (sglang sizes DFLASH's per-draft-token GatedDeltaNet scratch for max_running_requests:
# ~2.4 GB a request at 27B shapes, beside 57 GB of weights and its 12.9 GB activation reserve).
# Here every engine at one request (max_running_requests 1): DFLASH, DDTREE-16, the chain,
# DDTREE-64, call1's settings, --phases --profile. Carry the bundle (drafter and traces aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 32 --phases --profile \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg context_length=8192 --case-timeout-s 220 --deadline-s 400 \
  --configs DFLASH DDTREE-16 DDTREE-chain DDTREE-64 --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-300 >> $R/rc.txt
tail -n 30 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
