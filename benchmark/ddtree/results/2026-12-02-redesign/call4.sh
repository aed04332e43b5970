#!/bin/bash
# Device call (nvidia-h200), ~5 min, what the device time left allows: DDTREE-16 at Qwen3.6-27B
# shapes after the redesign, one and four requests, context 8192 (RESULTS section 3's settings),
# to see the step cost did not move (issue 29's table: 22.51 ms at one request at 41bc1fd).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 300 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 --concurrency 1 4 --rounds 2 --prompt-len 512 --decode-tokens 32 \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4]' \
  --engine-arg context_length=8192 --case-timeout-s 280 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 -c "
import json; d=json.load(open('$R/sc/step_cost.json'))
for r in (d['rows'] if isinstance(d, dict) else d): print(r.get('config'), r.get('concurrency'), r.get('ms_per_step'), r.get('rounds_ms'))
" >> $R/rc.txt 2>&1
rm -rf $R/prep
