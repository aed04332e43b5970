#!/bin/bash
# Session 11 device call 2 (nvidia-h200), alone on the GPU: (1) the tree-GDN default after call 1
# (PDL apply at small grids, flat conv for batches) at issue 6's two goal shapes, the verify alone
# (ours_gdn_only_ms_48); (2) issue 7: budget auto at concurrency 4 beside budget 16 and the chain,
# three timed rounds each, 128 decoded tokens (session 10's next-call2.sh).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 75 bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 16 --budgets 64 --no-chain --no-upstream --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s 60 --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 555 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DDTREE-16 DDTREE-chain DDTREE-auto \
  --concurrency 4 --prompt-len 512 --decode-tokens 128 --rounds 3 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s $(( 530 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc kb prep && rm -rf prep
