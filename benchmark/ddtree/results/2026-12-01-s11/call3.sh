#!/bin/bash
# Session 11 device call 3 (session 10's next-call3.sh; nvidia-h200), alone on the GPU: issue 7 at
# 64 requests — the chain, budget 16 and budget auto (its table: the two rows before it), 32
# decoded tokens, 2 rounds. Each engine is sized for its largest concurrency, and a 64-request
# DDTREE engine was still capturing graphs for 27 batch sizes after 200 s in session 10, so these
# capture only batch size 64 (sglang's decode capture list, which its target-verify and our tree
# verify graphs follow too; untried: each row's verify_cuda_graph_steps shows whether they replayed).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-chain DDTREE-16 DDTREE-auto --concurrency 64 --rounds 2 \
  --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --engine-arg 'cuda_graph_bs_decode=[64]' \
  --deadline-s 470 --case-timeout-s 250 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
