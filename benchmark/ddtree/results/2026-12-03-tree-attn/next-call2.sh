#!/bin/bash
# Prepared, not run (nvidia-h200, ~9 min): issue 30's attention backends on the GPU
# (test/e2e/test_gpu_backends.py: flashinfer and fa3, head-dim-64 tiny Llama / hybrid in wy,
# budgets 16 with an oracle drafter accepting later siblings, 64 and auto, each against the
# plain engine on the same backend) and the hybrid at page size 16 (a preview case).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_PARALLEL=12 SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout 420 \
  bash scripts/gpu_run.sh --here --out $R/be test test/e2e/test_gpu_backends.py > $R/be.out 2>&1
echo "backends rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/be.out | tail -30 >> $R/rc.txt
SGLANG_DDTREE_GPU_PARALLEL=2 SGLANG_DDTREE_GPU_CASE_TIMEOUT=120 timeout 130 bash scripts/gpu_run.sh --here --out $R cases \
  --only plain-qwen35,ddtree15-qwen35-wy-oracle-first-page16 > $R/cases.out 2>&1
PYTHONPATH=python:/tmp/sglang-ddtree-site python3 test/e2e/gpu_cases.py check --out $R/cases 2>&1 | grep -v MISSING >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz be cases 2>/dev/null; rm -rf prep
