#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min): issue 29's step cost after the tree conv's q | k | v
# split (3 copies per GDN layer fewer). (A) DDTREE-16 and sglang's DFLASH at 1, 4, 16 and 64
# requests (DFLASH up to 16), --phases; (B) the DDTREE chain and DDTREE-64, --phases. Qwen3.6-27B
# shapes, dummy weights, context 8192, 512-token prompts, graphs + overlap. PACK=1 exports the
# developer variable SGLANG_DDTREE_TREE_ATTN_PACK_GQA=1 (GQA-packed tree attention: run so if
# next-call4's kernel bench finds it faster); MIN_BLOCKS=m likewise the minimum range length.
# Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
[ "$PACK" = 1 ] && export SGLANG_DDTREE_TREE_ATTN_PACK_GQA=1 && echo "pack_gqa=1" >> $R/rc.txt
[ -n "$MIN_BLOCKS" ] && export SGLANG_DDTREE_TREE_ATTN_MIN_BLOCKS=$MIN_BLOCKS && echo "min_blocks=$MIN_BLOCKS" >> $R/rc.txt
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
COMMON=(--models /tmp/qwen36 --concurrency 1 4 16 64 --rounds 2 --prompt-len 512
  --decode-tokens 32 --phases --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"'
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]'
  --engine-arg context_length=8192 --case-timeout-s 240)
timeout 300 bash scripts/gpu_run.sh --here --out $R/a bench benchmark/ddtree/step_cost.py "${COMMON[@]}" \
  --configs DDTREE-16 DFLASH --max-concurrency DFLASH=16 --out $R/a/step_cost.json > $R/a.out 2>&1
echo "A rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/step_cost.py \
  "${COMMON[@]}" --configs DDTREE-chain DDTREE-64 --deadline-s 160 --out $R/b/step_cost.json > $R/b.out 2>&1
echo "B rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/a/step_cost.json $R/step_cost_a.json 2>/dev/null; cp $R/b/step_cost.json $R/step_cost_b.json 2>/dev/null
grep -h "\[step_cost\]" $R/a.out $R/b.out | cut -c1-400 >> $R/rc.txt
tail -n 5 $R/a.out $R/b.out > $R/tails.txt; rm -rf $R/prep $R/a $R/b
