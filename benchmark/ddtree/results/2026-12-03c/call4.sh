#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min): (A) issue 30's 27B step on flashinfer, DDTREE-16
# and sglang's DFLASH at 1 and 16 requests (flashinfer's JIT builds its kernels at the first
# graph capture, ~35-48 s per batch size in call3: this sweep has the call to itself but B);
# (B) issue 29's chain and DDTREE-64 on triton at 1 and 16 requests beside DFLASH (not re-measured
# after the tree conv's q | k | v split). Same shapes and settings as call3. Carry the bundle
# (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
COMMON=(--models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true
  --engine-arg 'cuda_graph_bs_decode=[1,16]' --engine-arg context_length=8192)
timeout 330 bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py "${COMMON[@]}" \
  --engine-arg 'attention_backend="flashinfer"' --case-timeout-s 300 --configs DDTREE-16 DFLASH \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/step_cost.py \
  "${COMMON[@]}" --engine-arg 'attention_backend="triton"' --case-timeout-s 150 --deadline-s 150 \
  --configs DFLASH DDTREE-chain DDTREE-64 --out $R/b/step_cost.json > $R/b.out 2>&1
echo "B rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost_a.json 2>/dev/null; cp $R/b/step_cost.json $R/step_cost_b.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out $R/b.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out $R/b.out > $R/tails.txt; rm -rf $R/prep $R/a $R/b
cat $R/rc.txt
