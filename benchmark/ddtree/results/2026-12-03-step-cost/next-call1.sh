#!/bin/bash
# Prepared, not run (nvidia-h200, ~9-10 min): the whole GPU smoke suite (test/e2e/test_gpu_smoke.py,
# 30 engine cases incl. ddtree15-llama-oracle-first-page16) at the current commit, the one check issue 28 still needs (also the lossless check of issue 29's new defaults: drafter head in the graph, fused top-K, sync-free host lengths). Move
# assets/dflash-smollm2-135m/model.safetensors aside first (the tree must fit 64 MiB with the
# bundle); carry build/bundle/sglang-ddtree-bundle.tar.xz.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_PARALLEL=12 SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout 520 \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz smoke && rm -rf prep
