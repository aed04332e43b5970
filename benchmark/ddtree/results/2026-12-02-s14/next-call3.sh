#!/bin/bash
# Prepared in session 14 (not run), device call (nvidia-h200), alone on the GPU, ~9 min: issue 7
# item 2's sweep, part B — the chain again (anchor), budget 256 and DFLASH (both capped at 16
# requests), then budget auto over every budget measured (session 14's calls 2-3: chain, 8, 16, 32;
# part A: chain, 8, 64, 128; this call's rows over them), at 1 / 4 / 16 / 64 requests.
# BEFORE RUNNING: copy part A's sc/step_cost.json into the working tree and set PART_A below.
R=${OUT:?}
S14=benchmark/ddtree/results/2026-12-02-s14
PART_A=benchmark/ddtree/results/PART_A/sc/step_cost.json   # <- next-call2.sh's table
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-256 DFLASH DDTREE-auto --concurrency 1 4 16 64 \
  --max-concurrency DDTREE-256=16 --max-concurrency DFLASH=16 \
  --auto-table $S14/call2/sc/step_cost.json $S14/call3/sc/step_cost.json $PART_A \
  --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 440 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/auto_verdict.py $R/sc/step_cost.json $PART_A --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
