#!/bin/bash
# Session 4, device call 3 (nvidia-h200): wy diagnostics on the tiny Qwen3.5 (as call 2, which
# ran out of time on a cold machine) while the first full-size engine starts; then the step-cost
# sweep at Qwen3.6-27B size (--load-format dummy), timing only after the diagnostics finished.
R=${OUT:?}
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
mkdir -p $R/diag && cp benchmark/ddtree/results/2026-11-29-s4/call1/cases/plain-qwen35.json $R/diag/
( for c in ddtree8-qwen35-wy-check ddtree128-qwen35-wy-sync; do
    (timeout 240 bash scripts/gpu_run.sh --here --out $R/diag/run-$c bench test/srt/gpu_cases.py run $c \
       --out $R/diag > $R/diag/$c.out 2>&1; echo "$c rc=$?" >> $R/rc.txt) &
  done; wait; touch $R/diag.done ) &
STEP_COST_WAIT_FOR=$R/diag.done timeout 540 bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DFLASH DDTREE-32 no-spec DDTREE-64 \
  --concurrency 1 4 --prompt-len 512 --decode-tokens 32 --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 420 --case-timeout-s 330 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$?" >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz diag sc prep && rm -rf diag sc prep
