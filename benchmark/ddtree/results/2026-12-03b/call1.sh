#!/bin/bash
# nvidia-h200, ~9.5 min: (1) GPU unit tests of the tree attention (per-head and GQA-packed), the
# tree conv's q | k | v split and the GDN layer hook; (2) the whole smoke suite (issue 31's
# logprob / grammar / penalty cases included); (3) beside them the attention-backend suite
# (issue 30: flashinfer and fa3, head-dim-64 tiny Llama / hybrid); (4) the hybrid at page 16.
# Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
(timeout 240 bash scripts/gpu_run.sh --here --out $R/unit test test/kernels/test_tree_attention.py \
   test/kernels/test_conv.py test/engine/test_tree_gdn_layer.py > $R/unit.out 2>&1
 echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
 grep -E "^(FAILED|ERROR)|passed|failed" $R/unit.out | tail -12 >> $R/rc.txt) &
(SGLANG_DDTREE_GPU_PARALLEL=5 SGLANG_DDTREE_GPU_CASE_TIMEOUT=420 timeout 500 \
  bash scripts/gpu_run.sh --here --out $R/be test test/e2e/test_gpu_backends.py > $R/be.out 2>&1
 echo "backends rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
 grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/be.out | tail -20 >> $R/rc.txt) &
SGLANG_DDTREE_GPU_PARALLEL=11 SGLANG_DDTREE_GPU_CASE_TIMEOUT=360 timeout 420 \
  bash scripts/gpu_run.sh --here --out $R/smoke test test/e2e/test_gpu_smoke.py > $R/smoke.out 2>&1
echo "smoke rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^XFAIL|^ERROR" $R/smoke.out | tail -30 >> $R/rc.txt
SGLANG_DDTREE_GPU_PARALLEL=2 SGLANG_DDTREE_GPU_CASE_TIMEOUT=100 timeout 110 bash scripts/gpu_run.sh --here --out $R cases \
  --only plain-qwen35,ddtree15-qwen35-wy-oracle-first-page16 > $R/cases.out 2>&1
PYTHONPATH=python:/tmp/sglang-ddtree-site python3 test/e2e/gpu_cases.py check --out $R/cases 2>&1 | grep -v MISSING | tail -5 >> $R/rc.txt
echo "page16 at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz smoke unit be cases 2>/dev/null; rm -rf prep smoke unit be cases
cat $R/rc.txt
