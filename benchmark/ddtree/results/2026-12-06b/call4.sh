#!/bin/bash
# Any kind, ~4 min (on the warm machine of another call). The "fused" GatedDeltaNet verify that
# serves trees of one node chunk (budget 15, the default, and the chain: 16 nodes) with its pair
# products formed in the walk (VerifyOptions(pairs_in_prep=True), no pair kernel) against the pair
# kernel (the current default), 48 layers at Qwen3.6-27B shapes, the served bf16x3 precision, from
# CUDA-graph replays (bench_gdn_tree.py); then the verify kernels' GPU tests (the new path against
# float64 references and against the pair kernel's). Carry the bundle.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 200 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_gdn_tree.py \
  --cases 1x15 1xchain 4x15 16x15 16xchain 64x15 --no-upstream --defaults-only --alt-impls --alt-precisions \
  --precision bf16x3 --iters 30 \
  --variants fused:16:64:4:15:::bf16x3:pairs fused:16:64:4:15:::bf16x3:nopairs \
  --out $R/bench_gdn.json > $R/bench.out 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 540 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_verify.py -q \
  > $R/tests.out 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^ERROR" $R/tests.out | tail -15 >> $R/rc.txt
python3 - "$R/bench_gdn.json" >> $R/rc.txt 2>&1 <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r.get("bs"), r.get("budget"), r.get("chain"), {k: round(v, 4) for k, v in r.items()
          if k.startswith(("gdn_", "ours_gdn_only")) and isinstance(v, float)})
PY
cp $R/b/bench_gdn.json $R/ 2>/dev/null
cd $R && tar cJf logs.tar.xz bench.out tests.out prep.out 2>/dev/null; rm -rf prep b t bench.out prep.out
cat $R/rc.txt
