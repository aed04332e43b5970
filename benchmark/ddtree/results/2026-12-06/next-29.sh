#!/bin/bash
# Prepared, not run on an H200 (one request ran on an H100: call10.sh). nvidia-h200 (needs_h200:
# DFLASH at 16 requests does not fit an H100 at 27B
# shapes), ~9.5 min. Issue 29's goals at 1 and 16 requests with their spread: DDTREE-16's ratio
# to DFLASH has read 0.84x (59cafef), 0.92x (297ecb6) and 0.94x (e4a8476) with no change to the
# step between them, one engine each per call. Here DFLASH, DDTREE-16, DDTREE-15 (a verify of 16
# positions, DFLASH's width, where budget 16 verifies 17: at c2afc7e budget 8, also 16 wide, cost
# 1.0 / 3.2 ms less per step than budget 16 at 1 / 16 requests, and at 16 requests 272 verify
# tokens against 256 cross a GEMM tile; the simulator gives budget 15 0.2-0.8% fewer tokens per
# step than 16 on every trace), then DDTREE-auto's engine with budget 16, the chain and budget 64
# pinned (step_cost.py --pin: a second DDTREE-16 reading from another engine, and the chain and
# DDTREE-64 goals without two more engine starts; the first to be cut by the call's limit); two timed
# rounds, --phases. The settings of
# results/2026-12-04b/call1 (27B shapes, dummy weights, context 8192, 512-token prompts, graphs +
# overlap, wy, triton, decode graphs [1, 16]). The current step reads the GatedDeltaNet
# projections in place (compat/gdn_views.py, commit 0ceebd5). Carry the bundle (assets' drafter
# and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 565 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 240 --configs DFLASH DDTREE-16 DDTREE-15 DDTREE-auto \
  --auto-table benchmark/ddtree/results/2026-12-03c/call4b/step_cost.json \
  benchmark/ddtree/results/2026-12-04b/call1/step_cost.json --pin 16 chain 64 \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
