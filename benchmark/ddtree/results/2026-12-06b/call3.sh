#!/bin/bash
# Prepared, not run: seven H200 starts failed on 2026-12-06; call5.sh ran on an H100 instead.
# Any kind (nvidia-h200 for DFLASH at 4: on an H100 it starts only for one request), ~9 min.
# Issue 29's "4 and 64 requests measured and reported beside them": DDTREE-15 (the default), the
# chain and sglang's DFLASH at 4 and 64 requests (DFLASH capped at 16: at 64 it cannot allocate
# its GatedDeltaNet scratch at 27B shapes), two timed rounds of 32 tokens, --phases; the settings
# of call2.sh with decode graphs [4, 64]. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 570 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 4 64 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[4,64]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --configs DDTREE-15 DFLASH DDTREE-chain \
  --max-concurrency DFLASH=16 --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost*.json $R/ 2>/dev/null  # (a configuration cut by the limit keeps its rows in step_cost.<config>.json)
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt
cd $R && tar cJf logs.tar.xz a.out prep.out shapes.out 2>/dev/null; rm -rf prep a a.out prep.out
cat $R/rc.txt
