#!/bin/bash
# Session 5, device call B (nvidia-h200): wy-mode diagnostics on the tiny Qwen3.5 (sglang's
# per-node verify beside ours, now also comparing the committed state; overlap off; one
# request at a time), started BEFORE the full-size engine (a tiny engine starting beside a
# 27B one finds no memory); then the step cost at Qwen3.6-27B size with the CUDA-graph tree
# verify on (DDTREE, snapshot path) beside the DFLASH chain, timing after the diagnostics.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep $(( $(date +%s) - t0 )) s" >> $R/rc.txt
mkdir -p $R/diag && cp benchmark/ddtree/results/2026-11-29-s5/callA/preview/cases/plain-qwen35.json $R/diag/
( for c in ddtree8-qwen35-wy-check ddtree8-qwen35-wy-nooverlap ddtree8-qwen35-wy-serial; do
    (timeout 300 bash scripts/gpu_run.sh --here --out $R/diag/run-$c bench test/srt/gpu_cases.py run $c \
       --out $R/diag > $R/diag/$c.out 2>&1; echo "$c rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
  done; wait; touch $R/diag.done ) &
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
sleep 40  # the tiny engines have their memory by now
SGLANG_DDTREE_VERIFY_CUDA_GRAPH=1 STEP_COST_WAIT_FOR=$R/diag.done timeout $(( 585 - $(date +%s) + t0 )) \
  bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DFLASH DDTREE-32 DDTREE-64 DDTREE-16 no-spec \
  --concurrency 1 4 --prompt-len 512 --decode-tokens 32 --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 400 --case-timeout-s 300 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz diag sc prep && rm -rf diag sc prep
