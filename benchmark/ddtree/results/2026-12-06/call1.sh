#!/bin/bash
# nvidia-h200, ~9 min. Issue 29: a wy verify's GatedDeltaNet layers read their projections in
# place (compat/gdn_views.py: no b/a copies, no q|k|v cat, no z copy; kernels/gated_norm.py).
# (t) the GPU tests of what changed: the gated norm against float64 and against sglang's kernel,
#     strided gates in every verify implementation, the hook's contract.
# (a) DDTREE-16, 1 and 16 requests, --phases --profile (device time by kernel family);
# (b) DDTREE-16 with SGLANG_DDTREE_GDN_COPIES=1 (sglang's copies: the before), 1 request, profiled;
# (c) sglang's DFLASH, 1 and 16 requests (upstream code: its profile is e4a8476's), same settings
#     as results/2026-12-04b/call1 (27B shapes, dummy weights, context 8192, 512-token prompts,
#     graphs + overlap, wy, triton, decode graphs [1, 16], two timed rounds).
# Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
left() { echo $(( 565 - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 120 bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_gated_norm.py test/kernels/test_verify.py \
  test/compat/test_gdn_views.py -k "gate or hook or forwards or projection" > $R/tests.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt; grep -E "passed|failed" $R/tests.out | tail -2 >> $R/rc.txt
COMMON=(--models /tmp/qwen36 --rounds 2 --prompt-len 512 --decode-tokens 32
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"'
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]'
  --engine-arg context_length=8192 --case-timeout-s 240)
step() {  # name, then step_cost arguments
  local n=$1; shift
  timeout $(left) bash scripts/gpu_run.sh --here --out $R/$n bench benchmark/ddtree/step_cost.py "${COMMON[@]}" "$@" \
    --out $R/$n/step_cost.json > $R/$n.out 2>&1
  echo "$n rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
  cp $R/$n/step_cost.json $R/$n-step_cost.json 2>/dev/null
  grep -h "\[step_cost\]" $R/$n.out | cut -c1-300 >> $R/rc.txt
}
step a --configs DDTREE-16 --concurrency 1 16 --phases --profile
SGLANG_DDTREE_GDN_COPIES=1 step b --configs DDTREE-16 --concurrency 1 --phases --profile
step c --configs DFLASH --concurrency 1 16
for n in a b c; do tail -n 15 $R/$n.out > $R/$n-tail.txt 2>/dev/null; done
rm -rf $R/prep $R/a $R/b $R/c
cat $R/rc.txt
