#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min): issue 30's 27B step on flashinfer, DDTREE-16 and
# sglang's DFLASH at 1 and 16 requests, a call of its own (flashinfer's JIT builds its kernels
# at the first graph capture of each batch size: over 200 s for one DDTREE engine in
# 2026-12-03b call3). Same shapes and settings as call4b (triton). Carry the bundle (assets'
# drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'cuda_graph_bs_decode=[1,16]' --engine-arg context_length=8192 \
  --engine-arg 'attention_backend="flashinfer"' --case-timeout-s 360 --deadline-s 380 \
  --configs DDTREE-16 DFLASH --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
grep -h -i "jit\|compil" $R/a.out | tail -n 8 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
