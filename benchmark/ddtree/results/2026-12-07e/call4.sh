#!/bin/bash
# nvidia-h100-x1, ~3 min on a warm machine. Issue 32: (a) the v2 GSM8K replay at 1 request,
# DDTREE-auto with the chain / 16 / 64 pinned; (b) v2 MT-Bench at 1 and 4 requests with DFLASH
# (failed: that trace was not carried; call5 ran it at 1 request). Files in ab.tgz.
# Carry the bundle and benchmark/ddtree/traces/v2/gsm8k.pt.
R=$OUT; mkdir -p $R/a $R/b
OUT=$R/a TRACE=benchmark/ddtree/traces/v2/gsm8k.pt CONFIGS="DDTREE-auto" CONC="1" DFLASH_CAP=4 PIN="chain 16 64" PHASES=1 \
  LIMIT=170 DEADLINE=100 CASE_TIMEOUT=160 bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh > $R/a.out 2>&1
echo "a rc=$?"; grep -h "^|" $R/a.out
OUT=$R/b TRACE=benchmark/ddtree/traces/v2/mt_bench.pt CONFIGS="DDTREE-auto DFLASH" CONC="1 4" DFLASH_CAP=4 PIN="chain 16 64" PHASES=1 \
  LIMIT=260 DEADLINE=170 CASE_TIMEOUT=200 bash benchmark/ddtree/results/2026-12-06/next-replay-v2.sh > $R/b.out 2>&1
echo "b rc=$?"; grep -h "^|" $R/b.out
cd $R && tar czf ab.tgz a b a.out b.out && rm -rf a b a.out b.out
