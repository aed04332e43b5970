#!/bin/bash
# nvidia-h200 (needs_h200: sglang's DFLASH sized for 16 requests does not fit an H100 at 27B shapes), ~9.5 min.
# Issue 29's ratios at 1 and 16 requests at the current commit, one sweep on one GPU: sglang's
# DFLASH; DDTREE-auto's engine with budget 16, the chain and budget 64 pinned in it (step_cost.py
# --pin: the issue's DDTREE-16, chain and DDTREE-64 goals from one engine start); DDTREE-15 (the
# default) with the H100's shipped GEMM table given by path (no table is shipped for the H200: is
# the H100's faster than cuBLAS here too?), and DDTREE-15 with the default (auto: cuBLAS on an
# H200). The settings of results/2026-12-04b/call1 (27B shapes, dummy weights, context 8192,
# 512-token prompts, graphs + overlap, wy, triton, decode graphs [1, 16]), two timed rounds of 32
# tokens, --phases. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
T=benchmark/ddtree/results
H100=python/sglang_ddtree/kernels/gemm_tables/nvidia_h100_80gb_hbm3.json
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
# The H100's table, its meta.device relabelled to this GPU (gemm_table.load_table refuses a table
# measured on another card): an experiment's file, not a shipped table.
python3 - $H100 "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)" $R/h100_table.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["meta"]["measured_on"], t["meta"]["device"] = t["meta"]["device"], sys.argv[2]
json.dump(t, open(sys.argv[3], "w"), indent=1)
PY
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( ${END:-575} - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 16 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 \
  --configs DFLASH DDTREE-auto DDTREE-15@2 DDTREE-15 \
  --config-arg "DDTREE-15@2:speculative_ddtree_gemm_table=\"$R/h100_table.json\"" \
  --auto-table $T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json --pin 16 chain 64 \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt
# (the device tool returns at most 8 files: a configuration cut by the limit keeps its rows in
# a/step_cost.<config>.json, inside logs.tar.xz)
cd $R && tar cJf logs.tar.xz a a.out prep.out shapes.out 2>/dev/null; rm -rf prep a a.out prep.out shapes.out
cat $R/rc.txt
