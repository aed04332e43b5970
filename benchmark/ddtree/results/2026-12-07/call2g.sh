#!/bin/bash
# Any one-GPU kind, ~5 min. Issue 29: do the step's GEMMs have room? kernels/skinny_gemm.py's GPU
# tests (against float64; tilings agree), then bench_skinny_gemm.py: cuBLAS (F.linear, what
# sglang's layers call) against the Triton kernel's tilings at Qwen3.6-27B's weight shapes, M = 16
# and 17 (a verify of budget 15 / 16 at one request), each in a CUDA graph over weight copies
# several times the L2, and the target's whole sequence of linear layers (64 layers + lm_head)
# both ways, beside the card's copy rate. M (default "16 17"), END (default 330: seconds the call
# may take) and EXTRA_TESTS (more pytest paths) set other runs of it. Carry the bundle.
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_skinny_gemm.py ${EXTRA_TESTS:-} > $R/t.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
tail -n 3 $R/t.out >> $R/rc.txt
timeout $(( ${END:-330} - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/b bench \
  benchmark/ddtree/bench_skinny_gemm.py --m ${M:-16 17} --max-seconds $(( ${END:-330} - 60 - $(date +%s) + t0 )) \
  --out $R/skinny_gemm.json > $R/b.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[skinny_gemm\]" $R/b.out | cut -c1-400 >> $R/rc.txt
cd $R && tar czf logs.tgz t.out t b.out 2>/dev/null; rm -rf t t.out b b.out
cat $R/rc.txt
