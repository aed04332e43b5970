#!/bin/bash
# Session 14 call 3 (device, nvidia-h200), ~8 min: issue 7 item 2's sweep continued after call 2 ran
# out of time (engine start-up ~60-80 s each: only no-spec, DDTREE-chain and DFLASH at 1 / 4 fit):
# DDTREE-16, -8, -32, then budget auto over these rows and call 2's (--auto-table: its chain rows),
# at 1 / 4 / 16 / 64 requests. Verdict: this call's table with call 2's.
R=${OUT:?}
T=benchmark/ddtree/results/2026-12-02-s14/call2/sc/step_cost.json
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 470 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 DDTREE-8 DDTREE-32 DDTREE-auto --concurrency 1 4 16 64 \
  --auto-table $T --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 400 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/auto_verdict.py $R/sc/step_cost.json $T --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
