#!/bin/bash
# Any one-GPU kind (an H100 is enough), ~9.5 min. Issue 29: do the step's GEMMs have room, alone and
# in the engine? (1) GPU tests: kernels/skinny_gemm.py against float64, compat/skinny_linear.py's
# kernel path, and the step statistics kernel (test_gpu.py, not yet run on a GPU). (2)
# bench_skinny_gemm.py at M = 16 (a budget-15 verify at one request): cuBLAS against the Triton
# tilings at Qwen3.6-27B's weight shapes, and the target's whole sequence of linear layers both
# ways. (3) Only where (2) found a tiling at least 2% faster than cuBLAS: call5.sh with (2)'s table,
# the in-engine A/B (DDTREE-15 against DDTREE-15@2 with SGLANG_DDTREE_SKINNY_GEMM; files in ab/).
# (3) fits after (1) and (2) only where an engine starts in ~100 s (seen on the H200); on an H100
# commit (2)'s table and run call5.sh with it.
# END (default 585) is the step-cost sweep's end, seconds from the call's start. Carry the bundle
# (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
timeout 110 bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_skinny_gemm.py \
  test/compat/test_skinny_linear.py test/core/test_gpu.py > $R/t.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
tail -n 3 $R/t.out >> $R/rc.txt
timeout 200 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 16 \
  --max-seconds 140 --out $R/skinny_gemm.json > $R/b.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[skinny_gemm\]" $R/b.out | cut -c1-300 >> $R/rc.txt
n=$(python3 -c "import json; print(sum(1 for r in json.load(open('$R/skinny_gemm.json'))['rows'] if r.get('best_vs_cublas', 9) <= 0.98))" 2>/dev/null)
echo "tilings faster than cuBLAS by 2%: ${n:-none}" >> $R/rc.txt
if (( ${n:-0} > 0 )); then
  mkdir -p $R/ab
  OUT=$R/ab TABLE=$R/skinny_gemm.json END=$(( ${END:-585} - $(date +%s) + t0 )) \
    bash benchmark/ddtree/results/2026-12-07/call5.sh > /dev/null 2>&1
  echo "A/B (call5.sh, results in ab/):" >> $R/rc.txt
  cat $R/ab/rc.txt >> $R/rc.txt 2>/dev/null
fi
cd $R && tar czf logs.tgz t.out t b.out 2>/dev/null; rm -rf t t.out b b.out
cat $R/rc.txt
