#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min): issue 29 after every change of 2026-12-03 (head in the graph, fused top-K, no sync), with kernel families. Qwen3.6-27B shapes, dummy
# weights, context 8192, triton attention, graphs and overlap on: DDTREE-16 (first: it absorbs the
# Triton compiles), DFLASH, the DDTREE chain and DDTREE-64 at 1 and 16 requests, device ms per
# phase and host ms per phase (--phases), host synchronisations inside the step (--sync-check),
# device time per kernel family and per phase x family (--profile). Carry build/bundle/sglang-ddtree-bundle.tar.xz
# (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 575 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 DFLASH DDTREE-chain DDTREE-64 --concurrency 1 16 --rounds 2 \
  --prompt-len 512 --decode-tokens 32 --phases --sync-check --profile --deadline-s 420 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 300 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 - >> $R/rc.txt 2>&1 <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/sc/step_cost.json"))
for r in (d["rows"] if isinstance(d, dict) else d):
    print(r.get("config"), r.get("concurrency"), r.get("ms_per_step"), "phases", r.get("phase_ms"),
          "syncs", {k: v for k, v in (r.get("timed") or {}).items() if k.startswith("host_sync")},
          "families", (r.get("profile") or {}).get("by_category"), "by_phase", (r.get("profile") or {}).get("by_phase"))
PY
grep -h "host synchronisation" -A12 $R/sc/*.log $R/sc.out 2>/dev/null | head -80 > $R/syncs.txt
rm -rf $R/prep
