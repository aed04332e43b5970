#!/bin/bash
# Any kind, ~7.5 min: call4.sh's kernel A/B and call1h.sh's replay at one request only, in one
# call (the device budget left after this session's failed starts fits one start). (a) the
# "fused" GatedDeltaNet verify of one-chunk trees (budget 15, the chain) with its pair products
# formed in the walk against the pair kernel (bench_gdn_tree.py, 48 layers, Qwen3.6-27B shapes,
# bf16x3, CUDA-graph replays); (b) the v2 HumanEval trace replayed at one request: DDTREE-auto
# (c91e488's estimates) with the chain, 16 and 64 pinned in its engine, and sglang's DFLASH,
# --phases; (c) the verify kernels' GPU tests in what time is left. Carry the bundle and the
# v2 HumanEval trace.
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 170 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_gdn_tree.py \
  --cases 1x15 1xchain 16x15 4x15 64x15 --no-upstream --defaults-only --alt-impls --alt-precisions \
  --precision bf16x3 --iters 30 \
  --variants fused:16:64:4:15:::bf16x3:pairs fused:16:64:4:15:::bf16x3:nopairs \
  --out $R/bench_gdn.json > $R/bench.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 - "$R/bench_gdn.json" >> $R/rc.txt 2>&1 <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r.get("bs"), r.get("budget"), {k: round(v, 4) for k, v in r.items()
          if k.startswith(("gdn_", "ours_gdn_only")) and isinstance(v, float)})
PY
mkdir -p $R/rp
T=benchmark/ddtree/results
timeout $(( 540 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/rp bench benchmark/ddtree/replay_bench.py \
  --trace benchmark/ddtree/traces/v2/humaneval.pt --models /tmp/qwen36 --configs DDTREE-auto DFLASH --concurrency 1 \
  --rounds 2 --round-requests 8 --warmup-requests 4 --max-concurrency DFLASH=1 \
  --auto-table $T/2026-12-03c/call4b/step_cost.json $T/2026-12-04b/call1/step_cost.json --pin chain 16 64 --phases \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --engine-arg context_length=8192 --case-timeout-s 300 \
  --out $R/replay.json > $R/rp.out 2>&1
echo "replay rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "\[replay\]" $R/rp.out | cut -c1-400 >> $R/rc.txt
sed -n '/^| config |/,$p' $R/rp.out >> $R/rc.txt
left=$(( 585 - $(date +%s) + t0 ))
if (( left > 60 )); then
  timeout $left bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_verify.py -q > $R/tests.out 2>&1
  echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
  grep -E "passed|failed|^FAILED|^ERROR" $R/tests.out | tail -15 >> $R/rc.txt
fi
cd $R && tar cJf logs.tar.xz bench.out rp.out tests.out prep.out shapes.out 2>/dev/null
rm -rf prep b rp t bench.out rp.out tests.out prep.out
cat $R/rc.txt
