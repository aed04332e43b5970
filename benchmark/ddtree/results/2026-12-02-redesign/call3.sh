#!/bin/bash
# Device call (nvidia-h200), ~5 min: the GPU tests alone (calls 1-2 ran them beside 12 engines and
# ran out of time; one failure in test_commit.py unexplained): the failing test first for its
# message, then the rest with a per-test limit.
R=${OUT:?}
t0=$(date +%s)
G="bash scripts/gpu_run.sh --here"
$G --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 120 $G --out $R/t1 test --tb=short test/kernels/test_commit.py::test_cuda_commit_equals_triton_commit_and_reference \
  > $R/t1.out 2>&1
echo "t1 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 330 $G --out $R/t2 test --tb=short --timeout 120 --durations=10 test/kernels test/engine/test_tree_gdn_layer.py \
  test/core/test_gpu_core.py test/core/test_cuda_prebuilt.py test/srt/test_upstream_tree_linear_gpu.py -k "not qwen36" \
  > $R/t2.out 2>&1
echo "t2 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^ERROR|Error|assert" $R/t1.out | head -20 >> $R/rc.txt
grep -E "passed|failed|^FAILED|^ERROR" $R/t2.out | tail -15 >> $R/rc.txt
rm -rf $R/prep
