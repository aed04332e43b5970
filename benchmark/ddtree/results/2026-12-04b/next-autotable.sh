#!/bin/bash
# Prepared, not run (nvidia-h200; two calls of ~9.5 min): issue 32's budget-auto step-cost table at
# the current commit (section 5's table was measured at c2afc7e, when DDTREE-16 cost ~22.5 ms a step
# at one request; now ~18.4): the budgets auto chooses from, at 1 / 4 / 16 / 64 requests, the same
# settings as call1 (27B shapes, dummy weights, triton, graphs + overlap, wy, context 8192).
#   bash next-autotable.sh A   DDTREE-chain DDTREE-8 DDTREE-16 DDTREE-32
#   bash next-autotable.sh B   DDTREE-64 DDTREE-128 DDTREE-256
# Then replay with it: AUTO_TABLE='<A's step_cost.json> <B's>' TRACE=benchmark/ddtree/traces/v2/gsm8k.pt
# CONFIGS='DDTREE-auto DFLASH DDTREE-16' bash results/2026-12-04/replay.sh (next-replay-v2.sh).
# Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
case ${1:?A or B} in
  A) CONFIGS='DDTREE-chain DDTREE-8 DDTREE-16 DDTREE-32' ;;
  B) CONFIGS='DDTREE-64 DDTREE-128 DDTREE-256' ;;
esac
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --concurrency 1 4 16 64 --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --deadline-s 420 \
  --configs $CONFIGS --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out | cut -c1-250 >> $R/rc.txt
tail -n 20 $R/a.out > $R/tail.txt; rm -rf $R/prep $R/a
cat $R/rc.txt
