#!/bin/bash
# Prepared in session 14 (not run), device call (nvidia-h200), alone on the GPU, ~8 min; after
# next-call1..3 if the device time holds it, else first in the session after: budget 15 against
# budget 16 (the default) and the chain, at 1 / 4 / 16 / 64 requests. Budget 15 verifies 16
# positions per request, the draft block's, as the chain does; budget 16 verifies 17: 6% more
# target tokens, and the tree GDN kernels pad 17 nodes to 32-row tiles (bs 64 GDN + conv: 13.30 ms
# at 17 nodes vs 9.47 for the 16-node chain, session 12). Session 14 at 64 requests: budget 16
# 150.6 ms vs the chain's 132.5 (+14%). If 15 costs the chain's step, it is the better default.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
# The tree GDN kernels alone at 2^k - 1 against 2^k budgets (2^k vs 2^k + 1 nodes), ours only,
# each impl beside auto's pick: 16 nodes are one 16-node chunk ("fused"), 17 go to "twostage"
# (the root alone, then a 16-node tile); at bs 64 fused over two chunks was never timed.
timeout 110 bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --cases 16x15 16x16 64x15 64x16 64x31 64x32 64x63 64x64 --defaults-only --no-upstream \
   --precision bf16x3 --alt-precisions --alt-impls fused twostage --deadline-s 90 --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 500 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-15 DDTREE-16 --concurrency 1 4 16 64 \
  --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --deadline-s $(( 420 - $(date +%s) + t0 )) --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz kb sc prep && rm -rf prep
