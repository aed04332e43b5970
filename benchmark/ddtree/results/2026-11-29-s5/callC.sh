#!/bin/bash
# Session 5, device call C (nvidia-h200): tiny engines first (wy cross-check on tree nodes only,
# with tf32x3 and ieee products; CUDA-graph tree verify on the hybrid's per-node path at budgets
# 8/32/128 and the Llama at 32), then at Qwen3.6-27B size with graph verify on: no-spec and
# DDTREE-8 (snapshot), then DDTREE-64/32 in wy mode (timing after the tiny engines finished).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep $(( $(date +%s) - t0 )) s" >> $R/rc.txt
mkdir -p $R/diag
( for c in ddtree8-qwen35-wy-check ddtree8-qwen35-wy-check-ieee ddtree8-qwen35-graphs ddtree32-qwen35-graphs \
           ddtree32-llama-graphs; do
    (timeout 300 bash scripts/gpu_run.sh --here --out $R/diag/run-$c bench test/srt/gpu_cases.py run $c \
       --out $R/diag > $R/diag/$c.out 2>&1; echo "$c rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
  done; wait; touch $R/diag.done ) &
# Budget 128 on the hybrid's per-node path compiles for minutes: not waited for (it may overlap
# the full-size timing; its GPU work is a few small kernels).
(timeout 540 bash scripts/gpu_run.sh --here --out $R/diag/run-ddtree128-qwen35-graphs bench test/srt/gpu_cases.py run \
   ddtree128-qwen35-graphs --out $R/diag > $R/diag/ddtree128-qwen35-graphs.out 2>&1
 echo "ddtree128-qwen35-graphs rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
sleep 45
SC="benchmark/ddtree/step_cost.py --models /tmp/qwen36 --concurrency 1 4 --prompt-len 512 --decode-tokens 32
  --engine-arg disable_radix_cache=true --engine-arg attention_backend=\"triton\" --engine-arg sampling_backend=\"pytorch\"
  --engine-arg disable_prefill_cuda_graph=true --engine-arg log_level=\"info\" --case-timeout-s 240"
export SGLANG_DDTREE_VERIFY_CUDA_GRAPH=1 STEP_COST_WAIT_FOR=$R/diag.done
timeout $(( 360 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc1 bench $SC --configs no-spec DDTREE-8 \
  --deadline-s 200 --out $R/sc1/step_cost.json > $R/sc1.out 2>&1
echo "step_cost 1 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 555 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc2 bench $SC --configs DDTREE-64 DDTREE-32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --deadline-s 120 --out $R/sc2/step_cost.json > $R/sc2.out 2>&1
echo "step_cost 2 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz diag sc1 sc2 prep && rm -rf diag sc1 sc2 prep
