#!/bin/bash
# nvidia-h200, ~7 min: checks of the tree attention rework (the window's own keys as one more
# part of the split kernel, a parallel combine, the drafter's block through the same kernels):
# its GPU unit tests (against float64 and against sglang's kernel, target and drafter modes)
# beside the whole GPU smoke suite (lossless, every DDTREE case's target verify and drafter
# through the split kernel); then, alone on the GPU, the kernels against sglang's at the 27B
# target's and drafter's shapes, per minimum range length (1, 2, 4 key blocks).
# Carry build/bundle/sglang-ddtree-bundle.tar.xz (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
(timeout 200 bash scripts/gpu_run.sh --here --out $R/unit test test/kernels/test_tree_attention.py > $R/unit.out 2>&1
 echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
 grep -E "^(FAILED|ERROR)|passed|failed" $R/unit.out | tail -12 >> $R/rc.txt) &
SGLANG_DDTREE_GPU_PARALLEL=12 SGLANG_DDTREE_GPU_CASE_TIMEOUT=300 timeout 330 \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
echo "split-KV log lines (tree verify / drafter block) over the case logs:" >> $R/rc.txt
grep -rh "split-KV Triton kernel" $R/smoke 2>/dev/null | grep -o "DDTREE [a-z ]* attention" | sort | uniq -c >> $R/rc.txt
wait
B="timeout 60 env PYTHONPATH=python:/tmp/sglang-ddtree-site python3 benchmark/ddtree/bench_tree_attention.py"
$B --bs 1 4 16 --window 17 65 --ctx 544 8192 --min-blocks 2 1 4 --out $R/ta_target.json > $R/ta_target.out 2>&1
echo "bench target rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
$B --drafter --bs 1 4 16 --window 16 --ctx 544 8192 --min-blocks 2 1 4 --out $R/ta_drafter.json > $R/ta_drafter.out 2>&1
echo "bench drafter rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz smoke unit 2>/dev/null; rm -rf prep smoke unit
