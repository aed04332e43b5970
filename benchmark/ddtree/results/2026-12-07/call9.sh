#!/bin/bash
# Any one-GPU kind, ~9 min. Issue 29's one-request goals with the skinny GEMM, in one run:
# (1) bench_skinny_gemm.py at M = 16 / 17 / 65 (verify of budget 15 / 16 / 64) -> $R/skinny_gemm.json;
# (2) step_cost.py, one request: sglang's DFLASH, and DDTREE-16 / -15 / chain / -64 each with
# SGLANG_DDTREE_SKINNY_GEMM=(1)'s table (settings of call5.sh / call6.sh), --profile: each engine's
# GEMM family in device ms (call5/6 gained about half what the bench predicts at M = 16; the
# products the kernel took are each row's skinny_gemm_routed), files in sc/. Configurations in
# order of need; the sweep stops at END (default 585 s from the start). Carry the bundle (assets'
# drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
timeout 200 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 16 17 65 \
  --max-seconds 150 --out $R/skinny_gemm.json > $R/b.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[skinny_gemm\]" $R/b.out | cut -c1-300 >> $R/rc.txt
(cd $R && tar czf bench-logs.tgz b b.out 2>/dev/null; rm -rf b b.out)
# (2): call5.sh's step-cost sweep, files in sc/
mkdir -p $R/sc
OUT=$R/sc TABLE=$R/skinny_gemm.json CONFIGS="DFLASH DDTREE-16@2 DDTREE-15@2 DDTREE-chain@2 DDTREE-64@2" \
  SKINNY="DDTREE-16@2 DDTREE-15@2 DDTREE-chain@2 DDTREE-64@2" CASE_TIMEOUT=200 EXTRA=--profile \
  END=$(( ${END:-585} - $(date +%s) + t0 )) bash "$(dirname "$0")/call5.sh" > /dev/null
cat $R/sc/rc.txt >> $R/rc.txt
cat $R/rc.txt
