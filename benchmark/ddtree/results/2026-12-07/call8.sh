#!/bin/bash
# Any one-GPU kind. Issue 29: DDTREE-16 with SGLANG_DDTREE_SKINNY_GEMM=$TABLE (call7/skinny_gemm_m16_m17.json:
# the M = 16 and 17 tilings) against DDTREE-16 without it, one request, the settings of call5.sh. Run on
# the machine call6 left warm. Carry the bundle.
R=${OUT:?}
T=$(realpath ${TABLE:?})
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( ${END:-470} - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 64 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg max_running_requests=1 --engine-arg context_length=8192 --case-timeout-s 200 \
  --configs DDTREE-16@2 DDTREE-16 \
  --config-env "DDTREE-16@2:SGLANG_DDTREE_SKINNY_GEMM=$T" \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
cd $R && tar czf logs.tgz a.out shapes.out 2>/dev/null; rm -rf a a.out shapes.out
cat $R/rc.txt
