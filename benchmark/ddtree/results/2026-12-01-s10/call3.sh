#!/bin/bash
# Session 10, device call 3 (nvidia-h200): issue 7's missing 27B rows at concurrency 16 and 64
# first (no speculation, DFLASH, DDTREE-32, DDTREE-8; conc 4 and 1 after), then the part of issue
# 6's kernel grid never timed with the current kernels: bs 64 at every budget and budgets
# 128/256 at bs 1/4/16, beside upstream's per-node kernel (bf16x3, auto impl; pairs in the prep
# past 33 nodes).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 420 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs no-spec DFLASH DDTREE-32 DDTREE-8 \
  --concurrency 16 64 4 1 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 330 --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 500 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb64 bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 64 --budgets 16 32 64 128 256 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s 60 --out $R/kb64/gdn.json > $R/kb64.out 2>&1
echo "kb64 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kbig bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 128 256 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s 50 --out $R/kbig/gdn.json > $R/kbig.out 2>&1
echo "kbig rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc kb64 kbig prep && rm -rf prep
