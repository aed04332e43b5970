#!/bin/bash
# nvidia-h200, ~9.5 min, the whole call: issue 32 deliverable 3, tokens/s per
# request and accept length on a replayed drafter trace (benchmark/ddtree/replay_bench.py; docs/
# traces.md "Replay benchmark"): Qwen3.6-27B shapes, dummy weights, every engine replaying
# $TRACE (default benchmark/ddtree/traces/humaneval.pt, carried in the checkout), at 1 / 4 / 16 /
# 64 requests, triton, context 8192, graphs + overlap, wy; DFLASH up to 16 requests (it cannot
# allocate its GDN scratch for 64 at 27B). Budget auto chooses over the section-5 step-cost table
# (results/2026-12-02-s17/call3/sc/step_cost.auto-table.json, measured at c2afc7e).
# Per configuration ~110-150 s (engine start 60-90 s, the first on a fresh machine up to ~150 s
# with Triton's compiles; 8 requests a round, 2 timed rounds after a warm-up of 4; budget 64 at 64
# requests is the slowest cell, ~10 s a round), so one call fits about three configurations: they
# run in order of importance (auto, DFLASH, budget 16 first), none starts after 400 s into the
# call, and one cut by the call's end keeps its rows of the concurrencies it finished (its
# replay.<config>.json, its [replay] lines in rc.txt). A next call with CONFIGS='<meta.
# not_run_deadline of this one>' continues; `replay_bench.py --report A/replay.json B/replay.json --plot x.png`
# gives the table (and the plot, where matplotlib is) of both. Carry the bundle (assets' drafter
# moved aside) and the trace.
R=${OUT:?}
TRACE=${TRACE:-benchmark/ddtree/traces/humaneval.pt}
CONFIGS=${CONFIGS:-DDTREE-auto DFLASH DDTREE-16 DDTREE-chain no-spec DDTREE-32 DDTREE-64}
CONC=${CONC:-1 4 16 64}; CASE_TIMEOUT=${CASE_TIMEOUT:-240}
PHASES=${PHASES:-}  # non-empty: replay_bench.py --phases (device ms per step and phase, DDTREE rows)
PIN=${PIN:-}  # e.g. 'chain 16 64': DDTREE-auto's engine serves these fixed choices too (replay_bench.py --pin)
# Budget auto's step-cost table(s): step_cost.py outputs, merged in order (replay_bench.py --auto-table).
AUTO_TABLE=${AUTO_TABLE:-benchmark/ddtree/results/2026-12-02-s17/call3/sc/step_cost.auto-table.json}
# The replay's limit and the last configuration start, seconds from this script's start (a caller
# that runs something first in the same call passes less).
LIMIT=${LIMIT:-560}; DEADLINE=${DEADLINE:-400}
if [[ ! -f $TRACE ]]; then
  echo "next-replay.sh: no trace at $TRACE: record it first (benchmark/ddtree/record_traces.py, docs/traces.md) and" \
       "carry it in the checkout (or set TRACE=path)" | tee $R/rc.txt
  exit 2
fi
CAP=(); [[ " $CONFIGS " == *" DFLASH "* ]] && CAP=(--max-concurrency DFLASH=${DFLASH_CAP:-16})  # (a cap must name a listed config)
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
echo "prep at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
# No configuration starts after $DEADLINE s into the call (--deadline-s counts from the sweep's start).
timeout $(( LIMIT - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/rp bench benchmark/ddtree/replay_bench.py \
  --trace $TRACE --models /tmp/qwen36 --configs $CONFIGS --concurrency $CONC \
  --rounds 2 --round-requests 8 --warmup-requests 4 "${CAP[@]}" \
  --auto-table $AUTO_TABLE ${PIN:+--pin $PIN} ${PHASES:+--phases} \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,4,16,64]' \
  --engine-arg context_length=8192 --case-timeout-s $CASE_TIMEOUT --deadline-s $(( DEADLINE - $(date +%s) + t0 )) \
  --out $R/rp/replay.json --plot $R/rp/replay.png > $R/rp.out 2>&1
echo "replay rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cp $R/rp/replay.json $R/rp/replay.png $R/ 2>/dev/null
grep -h "\[replay\]" $R/rp.out | cut -c1-400 >> $R/rc.txt
sed -n '/^| config |/,$p' $R/rp.out >> $R/rc.txt
python3 -c "import json; m = json.load(open('$R/replay.json'))['meta']; print('not run (deadline):', m.get('not_run_deadline'),
'over cap:', m.get('over_cap'), 'failed:', m.get('failed'), 'problems:', m.get('problems'))" >> $R/rc.txt 2>&1
tail -n 20 $R/rp.out > $R/tail.txt
cd $R && tar czf res.tgz --exclude=res.tgz rp prep.out shapes.out rp.out 2>/dev/null; rm -rf prep rp prep.out rp.out
cat $R/rc.txt
