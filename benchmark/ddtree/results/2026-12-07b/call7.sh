#!/bin/bash
# nvidia-h100-x1 (the card of the shipped table), ~6 min. Prepared. Issue 29 at 2 and 4 requests:
# the shipped H100 table has rows for 16 / 17 tokens (one request) and the lm_head at 65 only, so a
# verify of 2 or 4 requests (32 / 34, 64 / 68 tokens at budget 15 / 16) runs on cuBLAS.
# bench_skinny_gemm.py at those token counts, the stream-K grids included (--streamk 1 2); ship
# rows at least 2% under cuBLAS with ship_gemm_table.py (shipped table first, this one after).
# Carry the bundle.
R=${OUT:?}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
timeout ${END:-380} bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py \
  --m 64 32 68 34 --streamk 1 2 --tiles 64x128x4 64x128x6 64x256x3 32x256x4 128x64x4 128x128x3 \
  --max-seconds $(( ${END:-380} - 50 )) --out $R/skinny_gemm_m32_m64.json > $R/b.out 2>&1
echo "bench rc=$?" >> $R/rc.txt
grep -h "\[skinny_gemm\]" $R/b.out | cut -c1-300 >> $R/rc.txt
cd $R && tar czf logs.tgz b.out b 2>/dev/null; rm -rf b b.out
cat rc.txt
