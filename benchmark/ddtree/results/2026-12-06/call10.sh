#!/bin/bash
# nvidia-h100-x1 (asked for when no H200 started), ~9.5 min. Issue 29's one-request goals at the
# current step (the GatedDeltaNet projections read in place): sglang's DFLASH, DDTREE-16,
# DDTREE-15 (16 verify positions, DFLASH's width) and DDTREE-auto's engine with budget 16, the
# chain and budget 64 pinned, one request, three timed rounds of 64 decode tokens, --phases. The
# settings of next-29.sh but one request only and max_running_requests=1 in every engine: on an
# H100 sglang's DFLASH sizes its per-draft-token GatedDeltaNet scratch for every running request
# and does not start at 16 (results/2026-12-05/call1). Carry the bundle (assets' drafter and the
# traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 64 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg max_running_requests=1 \
  --engine-arg context_length=8192 --case-timeout-s 240 --configs DFLASH DDTREE-16 DDTREE-15 DDTREE-auto \
  --auto-table benchmark/ddtree/results/2026-12-03c/call4b/step_cost.json \
  benchmark/ddtree/results/2026-12-04b/call1/step_cost.json --pin 16 chain 64 \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
