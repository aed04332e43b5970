#!/bin/bash
# Prepared in session 15 (not run), device call (nvidia-h200), alone on the GPU, ~9 min: issue 7's
# last sweep rows at --context-length 8192: budget 128 at 64 requests (session 15 call 3 ended
# inside it), then budget auto at 1 / 4 / 16 / 64 over every table (later rows replace earlier:
# sessions 14-15 and part C = next-call2.sh), with the verdict. Auto's widths' graphs go only up to
# the batch sizes the policy can choose them at (257 up to 16).
# BEFORE RUNNING: copy next-call2.sh's sc/step_cost.json into the tree as PART_C (below); the
# device's /tmp copy is used when the machine is still the same.
R=${OUT:?}
S14=benchmark/ddtree/results/2026-12-02-s14
S15=benchmark/ddtree/results/2026-12-02-s15
PART_C=$S15/partC/sc/step_cost.json
if [ -s /tmp/partC_step_cost.json ]; then PART_C=/tmp/partC_step_cost.json; fi
echo "PART_C=$PART_C" >> $R/rc.txt
COMMON=(--rounds 2 --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"'
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"'
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true
  --engine-arg 'log_level="info"' --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' --engine-arg context_length=8192)
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout 200 bash scripts/gpu_run.sh --here --out $R/sc128 bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-128 --concurrency 64 "${COMMON[@]}" \
  --case-timeout-s 190 --out $R/sc128/step_cost.json > $R/sc128.out 2>&1
echo "step_cost 128 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
TABLES=($S14/call2/sc/step_cost.json $S14/call3/sc/step_cost.json $S15/call2/sc/step_cost.json
        $S15/call3/sc/step_cost.json $S15/call3/sc/step_cost.DDTREE-128.json $R/sc128/step_cost.json $PART_C)
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-auto --concurrency 1 4 16 64 --auto-table "${TABLES[@]}" "${COMMON[@]}" \
  --case-timeout-s 330 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost auto rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/auto_verdict.py "${TABLES[@]}" $R/sc/step_cost.json --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc sc128 prep && rm -rf prep
