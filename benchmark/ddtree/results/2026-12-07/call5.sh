#!/bin/bash
# Any one-GPU kind, ~8 min on an H100 (two engine starts of ~3 min). Issue 29, the skinny GEMM in the
# engine: call4.sh's step (3), which runs it after its sweep; on its own for a card where it did
# not fit there. Also the step-cost sweep of call6.sh, call8.sh and call9.sh (their settings).
# TABLE (required): the sweep's table as committed (e.g.
# benchmark/ddtree/results/2026-12-07/call4/skinny_gemm.json). CONFIGS (default: DDTREE-15@2
# DDTREE-15) at one request, --speculative-ddtree-gemm-table $TABLE for those of SKINNY (default:
# DDTREE-15@2), the default (auto: the table shipped for the card, if any) for those of AUTO, and none
# (cuBLAS) for the other DDTREE ones, 27B shapes, dummy weights, the settings of results/2026-12-06/call10 (triton,
# graphs + overlap, wy, context 8192, 512-token prompts), 3 rounds of 64 tokens, --phases, EXTRA
# more step_cost.py arguments; CASE_TIMEOUT (default 260) per configuration, END (default 570)
# seconds for the call. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
[[ -f ${TABLE:?name the sweep table: TABLE=...} ]] || { echo "no table at $TABLE" | tee $R/rc.txt; exit 2; }
T=$(realpath $TABLE)
env_args=()
# The table for the configurations of SKINNY, none (cuBLAS) for every other DDTREE configuration.
for c in ${CONFIGS:-DDTREE-15@2 DDTREE-15}; do
  [[ $c == DDTREE* ]] || continue
  [[ " ${AUTO:-} " == *" $c "* ]] && continue
  if [[ " ${SKINNY:-DDTREE-15@2} " == *" $c "* ]]; then v="\"$T\""; else v='"none"'; fi
  env_args+=(--config-arg "$c:speculative_ddtree_gemm_table=$v")
done
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( ${END:-570} - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 64 --phases ${EXTRA:-} \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg max_running_requests=1 --engine-arg context_length=8192 --case-timeout-s ${CASE_TIMEOUT:-260} \
  --configs ${CONFIGS:-DDTREE-15@2 DDTREE-15} "${env_args[@]}" \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost*.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
cd $R && tar czf logs.tgz a.out shapes.out 2>/dev/null; rm -rf a a.out shapes.out
cat $R/rc.txt
