#!/bin/bash
# Any one-GPU kind, ~9.5 min. Issue 29 with the few-token GEMM behind --speculative-ddtree-gemm-table
# (default auto: kernels/gemm_tables/<card>.json; the H100's is shipped from call7's M = 16 / 17 table).
# (1) GPU tests, beside (2): test_gpu.py (the served step free of host synchronisation after
#     pad_layout's fix; on an H100 now with the shipped table), the kernel's, the hooks' and the
#     draft head's tests;
# (2) the lossless case ddtree15-qwen35-wy-skinny beside plain-qwen35 (check here afterwards:
#     python test/e2e/gpu_cases.py check --out <files>/cases/cases);
# (3) on a card without a shipped table: bench_skinny_gemm.py at M = 16 / 17 -> $R/skinny_gemm.json
#     (ship it with ship_gemm_table.py);
# (4) call5.sh's step-cost sweep at one request, --profile: sglang's DFLASH, DDTREE-16, the chain,
#     DDTREE-15 (the default) with the shipped table (auto) or (3)'s, stopping at END (default 585 s; none with under 90 s left).
# Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
here=$(dirname "$0")
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
echo "gpu: $gpu" > $R/rc.txt
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1  # the bundle, extracted once
timeout 200 bash scripts/gpu_run.sh --here --out $R/t test test/core/test_gpu.py test/kernels/test_skinny_gemm.py \
  test/compat/test_skinny_linear.py test/engine/test_draft_head.py > $R/t.out 2>&1 &
tests=$!
SGLANG_DDTREE_GPU_CASE_TIMEOUT=160 timeout 180 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 2 \
  --only plain-qwen35,ddtree15-qwen35-wy-skinny > $R/cases.out 2>&1
echo "cases rc=$? at $(el) s" >> $R/rc.txt
grep -h "\[gpu_cases\]" $R/cases.out | cut -c1-300 >> $R/rc.txt
wait $tests; echo "tests rc=$? at $(el) s" >> $R/rc.txt; tail -n 4 $R/t.out >> $R/rc.txt
slug=$(python3 -c "import re, sys; print(re.sub(r'[^a-z0-9]+', '_', sys.argv[1].lower()).strip('_'))" "$gpu")
shipped=python/sglang_ddtree/kernels/gemm_tables/$slug.json
C="DFLASH DDTREE-16 DDTREE-chain DDTREE-15"
if [[ -f $shipped ]]; then
  TABLE=$shipped; SKINNY=""; AUTO="DDTREE-16 DDTREE-chain DDTREE-15"
else
  timeout 150 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 16 17 \
    --max-seconds 110 --out $R/skinny_gemm.json > $R/b.out 2>&1
  echo "bench rc=$? at $(el) s" >> $R/rc.txt
  grep -h "sequence" $R/b.out | cut -c1-300 >> $R/rc.txt
  TABLE=$R/skinny_gemm.json; SKINNY="DDTREE-16 DDTREE-chain DDTREE-15"; AUTO=""
fi
mkdir -p $R/sc
if [[ -f $TABLE ]] && (( ${END:-585} - $(el) > 90 )); then
  OUT=$R/sc TABLE=$TABLE CONFIGS="$C" SKINNY="$SKINNY" AUTO="$AUTO" CASE_TIMEOUT=150 EXTRA=--profile \
    END=$(( ${END:-585} - $(date +%s) + t0 )) bash $here/call5.sh > /dev/null
  cat $R/sc/rc.txt >> $R/rc.txt
fi
# What comes back: rc.txt, the tables, and everything else (the cases' records too) in all.tgz.
cd $R && cp sc/step_cost.json . 2>/dev/null; rm -rf prep
tar czf /tmp/all.tgz --exclude=./rc.txt --exclude=./step_cost.json --exclude=./skinny_gemm.json . && \
  find . -mindepth 1 -maxdepth 1 ! -name rc.txt ! -name step_cost.json ! -name skinny_gemm.json -exec rm -rf {} + && \
  mv /tmp/all.tgz .
cat $R/rc.txt
