#!/bin/bash
# Session 11 device call 4 (nvidia-h200), alone on the GPU: call 3 (64 requests) crashed every
# DDTREE engine with CUBLAS_STATUS_EXECUTION_FAILED after decode steps of 16-48 requests replayed
# in the batch-64 graph: the padded rows' slot is sglang's PAD_SLOT_ID (-1) and the tree verify /
# tree conv read the memory before the state pool for them. With the fix (slot -1 read as slot 0):
# the padded-row GPU test, then call 3 again (chain, budget 16, budget auto; 64 requests).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 60 bash scripts/gpu_run.sh --here --out $R/ktest test test/core/test_gdn_tree_triton.py -q -k padded > $R/ktest.out 2>&1
echo "ktest rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 505 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DDTREE-auto --concurrency 64 --rounds 2 \
  --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --engine-arg 'cuda_graph_bs_decode=[64]' \
  --deadline-s $(( 430 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc ktest prep && rm -rf prep
