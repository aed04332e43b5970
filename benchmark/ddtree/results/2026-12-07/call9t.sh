#!/bin/bash
# Any one-GPU kind, ~5 min: what changed after call2g, on the GPU.
# (1) test_gpu.py (the served step's sync-debug test with the CUDA tree builder: pad_layout's fix)
#     and the skinny GEMM's tests (65 tokens now);
# (2) the lossless case of the skinny GEMM switch (gpu_cases.py ddtree15-qwen35-wy-skinny: every
#     linear product of the tiny hybrid's verify through the kernel, the down projection fused)
#     beside its plain reference; check the records here afterwards:
#     python test/e2e/gpu_cases.py check --out <files>/cases/cases (its case's verdict). Carry the bundle.
R=${OUT:?}
t0=$(date +%s)
timeout 200 bash scripts/gpu_run.sh --here --out $R/t test test/core/test_gpu.py test/kernels/test_skinny_gemm.py \
  test/compat/test_skinny_linear.py > $R/t.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" > $R/rc.txt; tail -n 4 $R/t.out >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=200 timeout 240 bash scripts/gpu_run.sh --here --out $R/cases cases --parallel 2 \
  --only plain-qwen35,ddtree15-qwen35-wy-skinny > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[gpu_cases\]" $R/cases.out >> $R/rc.txt
cd $R && tar czf logs.tgz t t.out cases.out 2>/dev/null; rm -rf t t.out cases.out; cat $R/rc.txt
