#!/bin/bash
# Any one-GPU kind, ~9 min. Issue 29's one-request goals with the skinny GEMM, in one run:
# (1) bench_skinny_gemm.py at M = 16 / 17 / 65 (verify of budget 15 / 16 / 64) -> $R/skinny_gemm.json;
# (2) step_cost.py, one request: sglang's DFLASH, and DDTREE-16 / -15 / chain / -64 each with
# SGLANG_DDTREE_SKINNY_GEMM=(1)'s table (settings of call5.sh / call6.sh), --profile: each engine's
# GEMM family in device ms (call5/6 gained about half what the bench predicts at M = 16; the
# products the kernel took are each row's skinny_gemm_routed). Configurations in order of
# need; the sweep stops at END (default 585 s from the start). Carry the bundle (assets' drafter and
# the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout 200 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 16 17 65 \
  --max-seconds 150 --out $R/skinny_gemm.json > $R/b.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[skinny_gemm\]" $R/b.out | cut -c1-300 >> $R/rc.txt
T=$R/skinny_gemm.json
timeout $(( ${END:-585} - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 --rounds 3 --prompt-len 512 --decode-tokens 64 --phases --profile \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1]' \
  --engine-arg max_running_requests=1 --engine-arg context_length=8192 --case-timeout-s 200 \
  --configs DFLASH DDTREE-16@2 DDTREE-15@2 DDTREE-chain@2 DDTREE-64@2 \
  --config-env "DDTREE-16@2:SGLANG_DDTREE_SKINNY_GEMM=$T" --config-env "DDTREE-15@2:SGLANG_DDTREE_SKINNY_GEMM=$T" \
  --config-env "DDTREE-chain@2:SGLANG_DDTREE_SKINNY_GEMM=$T" --config-env "DDTREE-64@2:SGLANG_DDTREE_SKINNY_GEMM=$T" \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
cd $R && tar czf logs.tgz a b a.out b.out shapes.out 2>/dev/null; rm -rf a b a.out b.out shapes.out
cat $R/rc.txt
