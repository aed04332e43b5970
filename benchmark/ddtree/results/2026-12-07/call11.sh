#!/bin/bash
# Any one-GPU kind, ~5.5 min (the session's last device time). (1) the few-token GEMM's lossless
# case (gpu_cases.py ddtree15-qwen35-wy-skinny beside plain-qwen35: --speculative-ddtree-gemm-table
# naming a table that sends every product of the tiny hybrid's verify, its lm_head and the
# drafter's top-K head to the kernel; check here with gpu_cases.py check); (2) on an H100 (the card
# of call7's M = 16 / 17 table) one step-cost sweep at one request, sglang's DFLASH beside
# DDTREE-16 and the chain with that table (call5.sh's settings), stopping at 320 s; elsewhere, and
# with time left, the GPU tests of compat/skinny_linear. Carry the bundle (assets' drafter and the
# traces moved aside).
R=${OUT:?}
here=$(dirname "$0")
t0=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
echo "gpu: $gpu" > $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=140 timeout 150 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 2 \
  --only plain-qwen35,ddtree15-qwen35-wy-skinny > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[gpu_cases\]" $R/cases.out | cut -c1-300 >> $R/rc.txt
if [[ $gpu == "NVIDIA H100 80GB HBM3" ]]; then
  mkdir -p $R/sc
  OUT=$R/sc TABLE=$here/call7/skinny_gemm_m16_m17.json CONFIGS="DFLASH DDTREE-16@2 DDTREE-chain@2" \
    SKINNY="DDTREE-16@2 DDTREE-chain@2" CASE_TIMEOUT=110 END=$(( 320 - $(date +%s) + t0 )) \
    bash $here/call5.sh > /dev/null
  cat $R/sc/rc.txt >> $R/rc.txt
fi
left=$(( 320 - $(date +%s) + t0 ))
if (( left > 40 )); then
  timeout $left bash scripts/gpu_run.sh --here --out $R/t test test/compat/test_skinny_linear.py \
    test/engine/test_draft_head.py > $R/t.out 2>&1
  echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; tail -n 3 $R/t.out >> $R/rc.txt
fi
cd $R && tar czf logs.tgz cases.out t.out 2>/dev/null; rm -rf cases.out t.out t
cat $R/rc.txt
