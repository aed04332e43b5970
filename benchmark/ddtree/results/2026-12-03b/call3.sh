#!/bin/bash
# nvidia-h200, ~9 min: issue 30's step costs at Qwen3.6-27B shapes (dummy weights, context 8192,
# 512-token prompts, graphs + overlap, wy), side by side in one sweep at 1 and 16 requests:
# DDTREE-16 and sglang's DFLASH on triton at page 1; DDTREE-16 at page 64 (@2); then DDTREE-16
# (@3) and DFLASH (@2) on flashinfer (its JIT builds its kernels first; the deadline keeps the
# call inside its limit). Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
FI='attention_backend="flashinfer"'
timeout 540 bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --deadline-s 380 \
  --configs DDTREE-16 DFLASH DDTREE-16@2 DDTREE-16@3 DFLASH@2 \
  --config-arg 'DDTREE-16@2:page_size=64' --config-arg "DDTREE-16@3:$FI" --config-arg "DFLASH@2:$FI" \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 30 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
