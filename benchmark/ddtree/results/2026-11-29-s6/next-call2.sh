#!/bin/bash
# Prepared in session 6 for the next session (not run yet), device call 2 (nvidia-h200), alone
# on the GPU: (1) the tree-GDN kernels at Qwen3.6-27B shapes, bs 1/16, B 16/64 — fused / split /
# inverse verify, fused vs per-layer commit (eager: with the host launch cost); (2) 27B step cost,
# wy + graph verify, concurrency 1/4/16: the rows budget auto chooses from, then auto over them
# (per-width graphs since session 6; session 6 measured 66 ms/step when it fell off the graphs),
# then DFLASH (startup ~115 s) and no-spec.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/kbench bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 16 --budgets 16 64 --alt-precisions tf32 --deadline-s 90 --out $R/kbench/gdn.json > $R/kbench.out 2>&1
echo "kbench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DDTREE-64 \
  DDTREE-auto DFLASH no-spec --concurrency 1 4 16 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 300 --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz kbench sc prep && rm -rf kbench sc prep
