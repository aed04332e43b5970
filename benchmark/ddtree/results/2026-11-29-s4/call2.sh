#!/bin/bash
# Session 4, device call 2 (nvidia-h200): wy-mode diagnostics on the tiny Qwen3.5 (sglang's
# per-node verify beside ours; budget 128 with synchronous launches), then the tree-GDN kernel
# timing of impl / tile variants at Qwen3.6-27B shapes (alone on the GPU), then the tile tests.
R=${OUT:?}
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
mkdir -p $R/diag && cp benchmark/ddtree/results/2026-11-29-s4/call1/cases/plain-qwen35.json $R/diag/
for c in ddtree8-qwen35-wy-check ddtree15-qwen35-wy-check-oracle-first ddtree128-qwen35-wy-sync; do
  (timeout 230 bash scripts/gpu_run.sh --here --out $R/diag/run-$c bench test/srt/gpu_cases.py run $c \
     --out $R/diag > $R/diag/$c.out 2>&1; echo "$c rc=$?" >> $R/rc.txt) &
done
wait
timeout 250 bash scripts/gpu_run.sh --here --out $R/bench bench benchmark/ddtree/bench_gdn_tree.py --bs 1 16 \
  --budgets 64 --no-upstream --alt-precisions --alt-impls split --variants split:16:32 split:32:32 fused:32:32 \
  split:16:64 fused:16:64 split:32:64 split:32:16 --deadline-s 200 --out $R/bench/gdn.json > $R/bench.out 2>&1
echo "bench rc=$?" >> $R/rc.txt
timeout 70 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -k block_shapes \
  > $R/ktest.out 2>&1; echo "ktest rc=$?" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz diag bench ktest prep && rm -rf diag bench ktest prep
