#!/bin/bash
# Any one-GPU kind, ~8 min on an H100 (two engine starts of ~3 min). Issue 29, the skinny GEMM in the
# engine: call4.sh's step (3), which runs it after its sweep; on its own for a card where it did
# not fit there.
# TABLE (required): the sweep's table as committed (e.g.
# benchmark/ddtree/results/2026-12-07/call4/skinny_gemm.json). DDTREE-15 against DDTREE-15@2 with
# SGLANG_DDTREE_SKINNY_GEMM=$TABLE, one request, 27B shapes, dummy weights, the settings of
# results/2026-12-06/call10 (triton, graphs + overlap, wy, context 8192, 512-token prompts), 3 rounds
# of 64 tokens, --phases. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
[[ -f ${TABLE:?name the sweep table: TABLE=...} ]] || { echo "no table at $TABLE" | tee $R/rc.txt; exit 2; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( ${END:-570} - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 64 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg max_running_requests=1 --engine-arg context_length=8192 --case-timeout-s 260 \
  --configs DDTREE-15@2 DDTREE-15 --config-env "DDTREE-15@2:SGLANG_DDTREE_SKINNY_GEMM=$(realpath $TABLE)" \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost*.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
cd $R && tar czf logs.tgz a.out shapes.out 2>/dev/null; rm -rf a a.out shapes.out
cat $R/rc.txt
