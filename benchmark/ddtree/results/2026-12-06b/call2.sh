#!/bin/bash
# Prepared, not run: seven H200 starts failed on 2026-12-06, and every H200 and H100 start on 2026-12-07.
# nvidia-h200 (needs_h200: sglang's DFLASH at 16 requests does not fit an H100 at 27B shapes), ~9.5 min.
# Issue 29's ratios at the current commit (default budget 15, the GatedDeltaNet projections read
# in place) at 1 and 16 requests: sglang's DFLASH twice (DFLASH and DFLASH@2, first and last: the
# spread between two of its engines, which has moved its ratio by 0.84-0.94x between calls),
# DDTREE-15 (the default), and DDTREE-auto's engine with budget 16, the chain and budget 64 pinned
# (step_cost.py --pin: the DDTREE-16, chain and DDTREE-64 goals without three more engine starts).
# Two timed rounds of 32 tokens, --phases; the settings of results/2026-12-04b/call1 (27B shapes,
# dummy weights, context 8192, 512-token prompts, graphs + overlap, wy, triton, decode graphs
# [1, 16]). Carry the bundle (assets' drafter and the traces moved aside).
# CONC, GRAPHS, CONFIGS and SWEEP (more step_cost.py arguments) set another sweep of the same
# settings (call3.sh).
R=${OUT:?}
CONC=${CONC:-1 16}; GRAPHS=${GRAPHS:-[1,16]}; CONFIGS=${CONFIGS:-DFLASH DDTREE-15 DDTREE-auto DFLASH@2}
T=benchmark/ddtree/results
SWEEP=${SWEEP---auto-table $T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json --pin 16 chain 64}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency $CONC --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg "cuda_graph_bs_decode=$GRAPHS" \
  --engine-arg context_length=8192 --case-timeout-s 200 --configs $CONFIGS $SWEEP \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt
# (the device tool returns at most 8 files: a configuration cut by the limit keeps its rows in
# a/step_cost.<config>.json, inside logs.tar.xz)
cd $R && tar cJf logs.tar.xz a a.out prep.out shapes.out 2>/dev/null; rm -rf prep a a.out prep.out shapes.out
cat $R/rc.txt
