#!/bin/bash
# Prepared, not run (nvidia-h200, ~9.5 min): issue 29's "before" table at the redesign's final
# commit. At Qwen3.6-27B shapes, context 8192: DFLASH, the DDTREE chain (budget 15, top-k 1) and
# DDTREE-16 at 1 and 16 requests, each with device ms per phase (--phases: CUDA events, DDTREE
# only) and device time per kernel family (--profile: two traced passes, trace_summary.py).
# Carry build/bundle/sglang-ddtree-bundle.tar.xz (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 DFLASH DDTREE-chain --concurrency 1 16 --rounds 2 --prompt-len 512 \
  --decode-tokens 32 --phases --profile \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 - >> $R/rc.txt 2>&1 <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/sc/step_cost.json"))
for r in (d["rows"] if isinstance(d, dict) else d):
    print(r.get("config"), r.get("concurrency"), r.get("ms_per_step"), "phases", r.get("phase_ms"),
          "families", (r.get("profile") or {}).get("by_category"))
PY
rm -rf $R/prep
