#!/bin/bash
# Session 17 call 4 (nvidia-h200, alone on the GPU, <= 520 s): call 3's two engines again, each in
# an engine of its own (DDTREE-auto@2, DDTREE-chain@2), for the between-engine spread the verdict
# needs (call 3 fitted two engines: ~4 min each with the first's Triton compile). Auto's table:
# call 3's, i.e. every earlier table with call 3's chain row. Verdict over calls 3 and 4.
R=${OUT:?}
B=benchmark/ddtree/results
TABLES=($B/2026-12-02-s14/call2/sc/step_cost.json
        $B/2026-12-02-s14/call3/sc/step_cost.DDTREE-16.json $B/2026-12-02-s14/call3/sc/step_cost.DDTREE-32.json
        $B/2026-12-02-s14/call4/sc/step_cost.json $B/2026-12-02-s14/call2/sc/step_cost.DFLASH.json
        $B/2026-12-02-s15/call2/sc/step_cost.json $B/2026-12-02-s15/call3/sc/step_cost.json
        $B/2026-12-02-s15/call3/sc/step_cost.DDTREE-128.json
        $B/2026-12-02-s16/call2/sc/step_cost.json $B/2026-12-02-s16/call3/sc128/step_cost.json
        $B/2026-12-02-s17/call3/sc/step_cost.json)
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
timeout $(( 515 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-auto@2 DDTREE-chain@2 --concurrency 1 4 16 64 \
  --auto-table "${TABLES[@]}" \
  --rounds 2 --prompt-len 512 --decode-tokens 32 --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' \
  --engine-arg disable_radix_cache=true --engine-arg 'attention_backend="triton"' \
  --engine-arg 'sampling_backend="pytorch"' --engine-arg disable_prefill_cuda_graph=true \
  --engine-arg 'log_level="info"' --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' --engine-arg context_length=8192 \
  --deadline-s $(( 330 - $(date +%s) + t0 )) --case-timeout-s 260 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "startup_s" $R/sc.out $R/sc/run.log | sort -u | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l[l.index('{'):]); print(r['config'], r['concurrency'], r['startup_s'], r['ms_per_step'], r['ms_per_step_rounds'], {k: v for k, v in r['timed'].items() if k.startswith('choice')})
" >> $R/rc.txt 2>&1
python3 benchmark/ddtree/auto_verdict.py $B/2026-12-02-s17/call3/sc/step_cost.json $R/sc/step_cost.json --out $R/sc/verdict.md >> $R/rc.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz sc prep && rm -rf prep
