#!/bin/bash
# nvidia-h200, ~5 min: after call1 — (1) the GDN layer test after the int32-conversion fix
# (tracked states); (2) the smoke cases call1 did not reach, the penalty cases against the plain
# run without overlap, the hybrid at page 16; (3) diagnostics of the head-dim-64 hybrid on
# flashinfer (call1: DDTREE 16 / 64 / auto equal to each other, not to plain): sglang's DFLASH
# there, sglang's per-node GDN path, the eager verify, and the same model on triton.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
(timeout 200 bash scripts/gpu_run.sh --here --out $R/unit test test/engine/test_tree_gdn_layer.py > $R/unit.out 2>&1
 echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
 grep -E "^(FAILED|ERROR)|passed|failed" $R/unit.out | tail -8 >> $R/rc.txt) &
ONLY=plain-qwen35,ddtree15-qwen35-oracle-first,ddtree16-qwen35-oracle-sibling,ddtree15-qwen35-wy-oracle-first-page16
ONLY=$ONLY,plain-llama,plain-llama-penalties,ddtree15-llama-oracle-first-penalties
ONLY=$ONLY,plain-qwen3564@flashinfer,dflash-qwen3564@flashinfer,ddtree64-qwen3564@flashinfer
ONLY=$ONLY,ddtree64-qwen3564-snapshot@flashinfer,ddtree64-qwen3564-eager@flashinfer
ONLY=$ONLY,plain-qwen3564@triton,ddtree64-qwen3564@triton,plain-llama64@flashinfer,dflash-llama64@flashinfer
SGLANG_DDTREE_GPU_PARALLEL=16 SGLANG_DDTREE_GPU_CASE_TIMEOUT=240 timeout 300 bash scripts/gpu_run.sh --here --out $R cases \
  --only $ONLY > $R/cases.out 2>&1
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
PYTHONPATH=python:/tmp/sglang-ddtree-site python3 test/e2e/gpu_cases.py check --out $R/cases 2>&1 | grep -v MISSING | cut -c1-400 >> $R/rc.txt
wait
cd $R && tar czf res.tgz --exclude=res.tgz unit cases 2>/dev/null; rm -rf prep unit cases
cat $R/rc.txt
