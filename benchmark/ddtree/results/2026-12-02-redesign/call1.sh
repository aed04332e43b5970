#!/bin/bash
# Device call (nvidia-h200), ~9.5 min: the redesign (engine/, verify_info.py, the tree GatedDeltaNet
# workspace, the eager-verify flag, the test plugin) on the GPU. Engine cases lossless vs plain in
# the background (parallel 12), the GPU-marked kernel / core / engine tests meanwhile, then the
# verdicts of gpu_cases.py check.
R=${OUT:?}
t0=$(date +%s)
CASES=plain-llama,plain-qwen35,dflash-qwen35,ddtree8-llama,ddtree32-llama-nooverlap,ddtree128-llama-graphs,\
ddtree15-llama-oracle-first,ddtree16-llama-oracle-sibling-graphs,ddtree16-llama-oracle-sibling-graphs-nomask,\
ddtree8-qwen35,ddtree16-qwen35-oracle-sibling-graphs,ddtree8-qwen35-eager,\
ddtree8-qwen35-wy,ddtree64-qwen35-wy,ddtree128-qwen35-wy,ddtree32-qwen35-wy-padded,ddtree8-qwen35-wy-nooverlap,\
ddtree16-qwen35-wy-oracle-sibling-graphs,ddtree15-qwen35-wy-check-oracle-first,ddtree8-qwen35-wy-check-xb-radix,\
ddtree-auto-llama,ddtree-auto-qwen35-wy,ddtree-auto-capped-qwen35-wy
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
SGLANG_DDTREE_GPU_CASE_TIMEOUT=330 timeout $(( 520 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/cases \
  cases --parallel 12 --only $CASES > $R/cases.out 2>&1 &
CPID=$!
timeout 300 bash scripts/gpu_run.sh --here --out $R/tests test -m gpu test/kernels test/core test/engine \
  test/srt/test_upstream_tree_linear_gpu.py > $R/tests.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
wait $CPID
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
PYTHONPATH=python:/tmp/sglang-ddtree-site python3 test/srt/gpu_cases.py check --out $R/cases/cases \
  > $R/check.out 2>&1
grep -v "^MISSING" $R/check.out >> $R/rc.txt
tail -3 $R/tests.out >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz cases tests && rm -rf prep
