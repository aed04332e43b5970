#!/bin/bash
# Prepared in session 16 (not run), device call (nvidia-h200), alone on the GPU, ~9.5 min: issue 7's
# last row, budget auto at 1 / 4 / 16 / 64 requests at --context-length 8192 over every table
# (later rows replace earlier; the same files as session 16's report), then auto_verdict.py.
# Session 16 call 3's run of this ran out of memory capturing width 65 at 64 requests; 9459092
# makes the wy commit inputs' storage once for the most positions and counts the lm_head output
# per width (automatic fraction ~0.60 for this table instead of 0.647).
R=${OUT:?}
B=benchmark/ddtree/results
TABLES=($B/2026-12-02-s14/call2/sc/step_cost.json
        $B/2026-12-02-s14/call3/sc/step_cost.DDTREE-16.json $B/2026-12-02-s14/call3/sc/step_cost.DDTREE-32.json
        $B/2026-12-02-s14/call4/sc/step_cost.json $B/2026-12-02-s14/call2/sc/step_cost.DFLASH.json
        $B/2026-12-02-s15/call2/sc/step_cost.json $B/2026-12-02-s15/call3/sc/step_cost.json
        $B/2026-12-02-s15/call3/sc/step_cost.DDTREE-128.json
        $B/2026-12-02-s16/call2/sc/step_cost.json $B/2026-12-02-s16/call3/sc128/step_cost.json)
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 545 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-auto --concurrency 1 4 16 64 --auto-table "${TABLES[@]}" \
  --rounds 2 --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' --engine-arg context_length=8192 \
  --case-timeout-s 500 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost auto rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "mem-fraction-static\|verify graphs for width\|Capture target verify CUDA graph end\|Multiple AROUND" $R/sc/run.log | cut -c1-240 >> $R/rc.txt
python3 benchmark/ddtree/auto_verdict.py "${TABLES[@]}" $R/sc/step_cost.json --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
