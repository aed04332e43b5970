#!/bin/bash
# Prepared in session 13 (not run), device call (nvidia-h200), alone on the GPU, ~7.5 min: issue 7
# item 2's sweep, part 2 of 3 — the chain again (the anchor between parts), DDTREE-8 and -32, then
# budget auto over this call's rows and part 1's (--auto-table: budget 16 from part 1), at 1 / 4 /
# 16 / 64 requests. Verdict: this call's table with part 1's (the chain in both).
# BEFORE RUNNING: copy part 1's sc/step_cost.json into the working tree at $T below.
R=${OUT:?}
T=benchmark/ddtree/results/PART1/sc/step_cost.json   # <- part 1's table (next-call2.sh)
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 470 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-8 DDTREE-32 DDTREE-auto --concurrency 1 4 16 64 \
  --auto-table $T --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 380 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/auto_verdict.py $R/sc/step_cost.json $T --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
