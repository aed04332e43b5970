#!/bin/bash
# Any one-GPU kind, ~2.5 min: the GPU tests changed after call2g: test_gpu.py (the served step's
# sync-debug test with the CUDA tree builder, pad_layout's fix) and the skinny GEMM at 65 tokens.
R=${OUT:?}
timeout 200 bash scripts/gpu_run.sh --here --out $R/t test test/core/test_gpu.py test/kernels/test_skinny_gemm.py \
  test/compat/test_skinny_linear.py > $R/t.out 2>&1
echo "tests rc=$?" > $R/rc.txt; tail -n 4 $R/t.out >> $R/rc.txt
cd $R && tar czf logs.tgz t t.out 2>/dev/null; rm -rf t t.out; cat $R/rc.txt
