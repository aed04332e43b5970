#!/bin/bash
# Prepared, not run (nvidia-h200, ~7.5 min): checks of the tree conv's q | k | v split and the
# GQA-packed tree attention (both after 297ecb6, interpreter-tested only): the GPU unit tests of
# the tree attention (float64 and sglang's kernel, per-head and packed), the conv and the GDN layer
# through the hook, beside the whole GPU smoke suite; then, alone on the GPU, the tree attention
# per head against packed at the 27B target's and drafter's shapes. Carry the bundle (assets'
# drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
(timeout 240 bash scripts/gpu_run.sh --here --out $R/unit test test/kernels/test_tree_attention.py \
   test/kernels/test_conv.py test/engine/test_tree_gdn_layer.py > $R/unit.out 2>&1
 echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
 grep -E "^(FAILED|ERROR)|passed|failed" $R/unit.out | tail -12 >> $R/rc.txt) &
SGLANG_DDTREE_GPU_PARALLEL=12 SGLANG_DDTREE_GPU_CASE_TIMEOUT=300 timeout 330 \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
wait
B="timeout 60 env PYTHONPATH=python:/tmp/sglang-ddtree-site python3 benchmark/ddtree/bench_tree_attention.py"
$B --bs 1 4 16 64 --window 17 65 --ctx 544 8192 --pack 0 1 --out $R/ta_target.json > $R/ta_target.out 2>&1
echo "bench target rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
$B --drafter --bs 1 4 16 64 --window 16 --ctx 544 2048 --pack 0 1 --out $R/ta_drafter.json > $R/ta_drafter.out 2>&1
echo "bench drafter rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz smoke unit 2>/dev/null; rm -rf prep smoke unit
