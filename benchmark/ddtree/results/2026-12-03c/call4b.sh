#!/bin/bash
# nvidia-h200, ~6 min: issue 29's chain and DDTREE-64 on triton at 1 and 16 requests beside
# sglang's DFLASH in one sweep (part B of call4.sh; its flashinfer part A did not fit in this
# session's device time: flashinfer's JIT took over 200 s for one DDTREE engine in 2026-12-03b
# call3). Qwen3.6-27B shapes, dummy weights, context 8192, 512-token prompts, graphs + overlap,
# wy. Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 480 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'cuda_graph_bs_decode=[1,16]' --engine-arg context_length=8192 \
  --engine-arg 'attention_backend="triton"' --case-timeout-s 200 --deadline-s 330 \
  --configs DFLASH DDTREE-chain DDTREE-64 --out $R/b/step_cost.json > $R/b.out 2>&1
echo "B rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/b/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/b.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/b.out > $R/tail.txt; rm -rf $R/prep $R/b
cat $R/rc.txt
