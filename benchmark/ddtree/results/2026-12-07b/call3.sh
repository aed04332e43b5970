#!/bin/bash
# nvidia-h100-x1, ~9.5 min. Four requests on an H100 (sglang's DFLASH sized for 4 needs ~10 GB of
# per-token GatedDeltaNet scratch beside the 57 GB of weights: it may start where 16 does not).
# (a) Issue 29: step_cost.py at 1 and 4 requests: sglang's DFLASH, DDTREE-auto's engine with budget
#     16, the chain and budget 64 pinned in it, and DDTREE-15 (the default), the settings of
#     results/2026-12-04b/call1 with decode graphs [1, 4], two timed rounds of 32 tokens, --phases.
# (b) Issue 32: the v2 HumanEval trace replayed at 4 requests: DDTREE-auto with the chain and
#     budgets 16 / 64 pinned, and sglang's DFLASH sized for 4 (DFLASH_CAP=4).
# Ran on 2026-12-07 (results/2026-12-07b/call3: its part b's files did not come back then, more
# than the tool's 8 under $OUT; fixed since). Carry the bundle and traces/v2/humaneval.pt (assets' drafter and the other traces moved aside).
R=${OUT:?}
here=$(dirname "$0")
T=benchmark/ddtree/results
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 300 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 4 --rounds 2 --prompt-len 512 --decode-tokens 32 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4]' \
  --engine-arg context_length=8192 --case-timeout-s 150 \
  --configs DFLASH DDTREE-auto DDTREE-15 \
  --auto-table $T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json --pin 16 chain 64 \
  --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/ 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-330 >> $R/rc.txt
tail -n 12 $R/a.out > $R/tail-a.txt
cd $R && tar cJf logs-a.tar.xz a a.out prep.out shapes.out 2>/dev/null; rm -rf prep a a.out prep.out shapes.out; cd - > /dev/null
el=$(( $(date +%s) - t0 ))
mkdir -p $R/b
OUT=$R/b TRACE=benchmark/ddtree/traces/v2/humaneval.pt CONFIGS="DDTREE-auto DFLASH" CONC=4 DFLASH_CAP=4 \
  PIN="chain 16 64" PHASES=1 LIMIT=$(( ${END:-585} - el )) DEADLINE=$(( ${END:-585} - 120 - el )) CASE_TIMEOUT=150 \
  bash $here/../2026-12-06/next-replay-v2.sh > /dev/null
cat $R/b/rc.txt >> $R/rc.txt
# The device tool returns at most 8 files, two folders down: b's replay.json beside, the rest in b.tgz.
cp $R/b/replay.json $R/ 2>/dev/null
cd $R && tar czf b.tgz b 2>/dev/null; rm -rf b
cat $R/rc.txt
