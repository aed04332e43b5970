#!/bin/bash
# Session 7, device call 3 (nvidia-h200): (1) the radix reruns' reference: the same rerun on a
# plain engine without a prefix cache (tiny hybrid, ~2 min); (2) alone on the GPU, 27B step
# cost, wy + graph verify, concurrency 1/4/16: the rows budget auto chooses from (chain, 16, 64),
# then auto over them (per-width verify graphs, first GPU timing), no-spec, DFLASH.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=150 timeout 160 bash scripts/gpu_run.sh --here --out $R/radix cases --parallel 2 \
   --only nocache-qwen35-rerun > $R/radix.out 2>&1
echo "radix rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 580 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench \
  benchmark/ddtree/step_cost.py --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DDTREE-64 \
  DDTREE-auto no-spec DFLASH --concurrency 1 4 16 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'log_level="info"' \
  --deadline-s 300 --case-timeout-s 150 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz radix sc prep && rm -rf radix sc prep
