#!/bin/bash
# nvidia-h200, ~7.5 min (the session's last device minutes), at the commit with the fused
# drafter top-K kernel and the drafter's host lengths that no longer synchronise (call2's
# --sync-check found one sync per step there). (1) the new GPU unit tests (fused top-K vs its
# reference at the drafter's real shape + graph replay; the sync watch); (2) DDTREE-16 and DFLASH
# at 1 and 16 requests, Qwen3.6-27B shapes, context 8192, phases + sync check; (3) GPU lossless
# cases through the changed paths (graph-folded head + fused top-K, overlap host lengths) on
# both tiny targets. Carry build/bundle/sglang-ddtree-bundle.tar.xz (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1  # extract the bundle once
# The lossless cases and the unit tests side by side first; the timing afterwards, alone.
SGLANG_DDTREE_GPU_PARALLEL=8 SGLANG_DDTREE_GPU_CASE_TIMEOUT=170 timeout 180 bash scripts/gpu_run.sh --here --out $R cases \
  --only ddtree8-llama,ddtree16-llama-oracle-sibling,ddtree8-qwen35-wy,ddtree16-qwen35-wy-oracle-sibling,ddtree8-qwen35-default,ddtree32-llama-nooverlap \
  > $R/cases.out 2>&1 &
cases=$!
timeout 120 bash scripts/gpu_run.sh --here --out $R/unit test test/kernels/test_draft_topk.py \
  test/engine/test_debug_log.py test/engine/test_draft_head.py > $R/unit.out 2>&1
echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" $R/unit.out | tail -20 >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
wait $cases
echo "cases rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
PYTHONPATH=python:/tmp/sglang-ddtree-site python3 test/e2e/gpu_cases.py check --out $R/cases 2>&1 | grep -v MISSING >> $R/rc.txt
left=$(( 440 - $(date +%s) + t0 ))
timeout $left bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 DFLASH --concurrency 1 16 --rounds 2 \
  --prompt-len 512 --decode-tokens 32 --phases --sync-check \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 170 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
PYTHONPATH=python python3 - >> $R/rc.txt 2>&1 <<'PY2'
import json, os
d = json.load(open(os.environ["OUT"] + "/sc/step_cost.json"))
for r in (d["rows"] if isinstance(d, dict) else d):
    print(r.get("config"), r.get("concurrency"), r.get("ms_per_step"), r.get("ms_per_step_rounds"), "phases",
          r.get("phase_ms"), "syncs", {k: v for k, v in (r.get("timed") or {}).items() if k.startswith("host_sync")})
PY2
cd $R && tar czf res.tgz --exclude=res.tgz sc cases unit 2>/dev/null; rm -rf prep
