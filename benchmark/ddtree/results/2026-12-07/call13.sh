#!/bin/bash
# H100, ~6 min, run right after call12.sh on the same held machine: bench_skinny_gemm.py at M = 65
# (budget 64's verify), merged into the shipped H100 table on the GPU host (ship_gemm_table.py),
# then call5.sh at one request, --profile: sglang's DFLASH, DDTREE-64 with that table (auto),
# DDTREE-64 with none (cuBLAS), DDTREE-16 (auto). Carry the bundle (assets' drafter and the traces
# moved aside).
R=${OUT:?}; t0=$(date +%s)
timeout 140 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 65 \
  --max-seconds 100 --out $R/skinny_gemm_m65.json > $R/b.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 ))" > $R/rc.txt
python3 benchmark/ddtree/ship_gemm_table.py benchmark/ddtree/results/2026-12-07/call7/skinny_gemm_m16_m17.json \
  $R/skinny_gemm_m65.json >> $R/rc.txt 2>&1
mkdir -p $R/sc
OUT=$R/sc TABLE=benchmark/ddtree/results/2026-12-07/call7/skinny_gemm_m16_m17.json \
  CONFIGS="DFLASH DDTREE-64 DDTREE-64@2 DDTREE-16" SKINNY="" AUTO="DDTREE-64 DDTREE-16" CASE_TIMEOUT=150 \
  EXTRA=--profile END=$(( 500 - $(date +%s) + t0 )) bash benchmark/ddtree/results/2026-12-07/call5.sh > /dev/null
cat $R/sc/rc.txt >> $R/rc.txt; cp $R/sc/step_cost.json $R/
cd $R && tar czf logs.tgz b.out b sc 2>/dev/null; rm -rf b b.out sc; cat rc.txt
