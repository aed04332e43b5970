#!/bin/bash
# nvidia-h200, ~9.8 min: beside it the GPU unit tests of the tree attention and the conv; the whole GPU smoke suite (test/e2e/test_gpu_smoke.py, 31 engine cases:
# every DDTREE case now through the split-KV tree attention, the default on the triton backend,
# and one through sglang's kernel; the wy cases through the conv that copies its input), the check
# issue 28 still needs; then, in the time left, the attention kernels alone
# (bench_tree_attention.py, 8 shapes) after the splits' minimum length and 8 waves per SM. Carry
# build/bundle/sglang-ddtree-bundle.tar.xz (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
# Beside the suite (both are checks, not timings): the GPU unit tests of this call's kernel changes.
(timeout 200 bash scripts/gpu_run.sh --here --out $R/unit test test/kernels/test_tree_attention.py \
  test/kernels/test_conv.py > $R/unit.out 2>&1; echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt;
 grep -E "^(FAILED|ERROR)|passed|failed" $R/unit.out | tail -8 >> $R/rc.txt) &
SGLANG_DDTREE_GPU_PARALLEL=12 SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout 530 \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
echo "split-KV tree attention log lines per case log:" >> $R/rc.txt
grep -rl "split-KV Triton kernel" $R/smoke 2>/dev/null | wc -l >> $R/rc.txt
left=$(( 585 - $(date +%s) + t0 ))  # what time remains: the attention kernels alone again (splits of >= 4 key blocks)
[ $left -gt 30 ] && PYTHONPATH=python:/tmp/sglang-ddtree-site timeout $left python3 benchmark/ddtree/bench_tree_attention.py \
  --bs 1 16 --window 17 65 --ctx 544 8192 --out $R/tree_attention.json > $R/ba.out 2>&1
echo "bench_tree_attention at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz smoke unit && rm -rf prep smoke unit
