#!/bin/bash
# Any one-GPU kind, ~70 s warm. Issue 29: bench_skinny_gemm.py at M = 17 (a budget-16 verify at one
# request) and 65 (budget 64: beyond the kernel's M <= 64, cuBLAS only), no tests (call2g ran them).
# Run on the machine call2g / call6 left warm. Carry the bundle.
R=${OUT:?}
timeout 330 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 17 65 \
  --max-seconds 270 --out $R/skinny_gemm.json > $R/b.out 2>&1
echo rc=$?
grep -h "\[skinny_gemm\]" $R/b.out | cut -c1-420
cd $R && tar czf logs.tgz b.out b; rm -rf b b.out
# Then, here: call7/skinny_gemm_m16_m17.json = call2g's rows + these (the table call8.sh uses).
