#!/bin/bash
# Device call (nvidia-h200), ~8 min: the hybrid cases again after the GDN-mode fix (call 1 served
# every hybrid step as attention-only: the mode was read before DFLASH set it), and the GPU tests
# with a per-test limit and a junit record (call 1's ran out of its 300 s in sglang's qwen36-shaped
# tree-kernel compiles).
R=${OUT:?}
t0=$(date +%s)
CASES=plain-qwen35,ddtree8-qwen35,ddtree16-qwen35-oracle-sibling-graphs,ddtree8-qwen35-eager,\
ddtree8-qwen35-wy,ddtree64-qwen35-wy,ddtree128-qwen35-wy,ddtree32-qwen35-wy-padded,ddtree8-qwen35-wy-nooverlap,\
ddtree16-qwen35-wy-oracle-sibling-graphs,ddtree15-qwen35-wy-check-oracle-first,ddtree8-qwen35-wy-check-xb-radix,\
ddtree-auto-qwen35-wy,ddtree-auto-capped-qwen35-wy,ddtree8-qwen35-default,ddtree16-llama-oracle-sibling
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout $(( 500 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/cases \
  cases --parallel 12 --only $CASES > $R/cases.out 2>&1 &
CPID=$!
timeout 420 bash scripts/gpu_run.sh --here --out $R/tests test --timeout 150 --junitxml=$R/tests/junit.xml \
  test/kernels test/engine/test_tree_gdn_layer.py test/core/test_gpu_core.py test/core/test_cuda_prebuilt.py \
  test/srt/test_upstream_tree_linear_gpu.py -k "not qwen36" > $R/tests.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
wait $CPID
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
PYTHONPATH=python:/tmp/sglang-ddtree-site python3 test/srt/gpu_cases.py check --out $R/cases/cases \
  2>/dev/null | grep -v "^MISSING" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^ERROR" $R/tests.out | tail -15 >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz cases tests && rm -rf prep
