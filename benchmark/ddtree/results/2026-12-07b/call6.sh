#!/bin/bash
# nvidia-h100-x1 (the card of the shipped table), ~9.5 min. Prepared. Issue 29: does a stream-K
# grid (kernels/skinny_gemm.py, Config.streamk) read the verify's weights faster than the shipped
# tilings? Alone, the products reach 86-95% of the rate the lm_head's 3880 tiles reach (the
# tail of the last wave, and 80 of 132 multiprocessors busy at N = 5120): ~1 ms a step if all
# read at the lm_head's rate.
# (1) the kernel's GPU tests (the stream-K grid against float64, counters zero after CUDA-graph
#     replays, the same bits every replay);
# (2) bench_skinny_gemm.py at M = 16 (budget 15 and the chain) over the tiles the shipped table
#     uses, each also as a stream-K grid of 1 and 2 programs per multiprocessor, and the 64-layer
#     sequence;
# (3) for the rows the shipped table serves (at least 2% under cuBLAS): where (2) found a
#     stream-K tiling at least 2% faster than the shipped tiling timed in the same run (else the
#     best plain one), a table = the shipped one with those rows swapped in
#     ($R/streamk_table.json), and call5.sh's
#     in-engine A/B at one request: DDTREE-15, sglang's DFLASH and the chain, with the shipped
#     table (auto) and with that table (@2), stopping at END (default 585 s).
# Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
here=$(dirname "$0")
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
echo "gpu: $gpu" > $R/rc.txt
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 200 bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_skinny_gemm.py > $R/t.out 2>&1
echo "tests rc=$? at $(el) s" >> $R/rc.txt; tail -n 3 $R/t.out >> $R/rc.txt
timeout 200 bash scripts/gpu_run.sh --here --out $R/b bench benchmark/ddtree/bench_skinny_gemm.py --m 16 \
  --tiles 64x128x4 64x128x6 64x256x3 32x256x4 128x64x4 256x64x3 --streamk 1 2 --max-seconds 170 \
  --out $R/skinny_gemm_streamk.json > $R/b.out 2>&1
echo "bench rc=$? at $(el) s" >> $R/rc.txt
grep -h "sequence" $R/b.out | cut -c1-300 >> $R/rc.txt
shipped=$(PYTHONPATH=python python3 -c "import sys; from sglang_ddtree.kernels.gemm_table import shipped_table
print(shipped_table(sys.argv[1]) or '')" "$gpu")
python3 - "$shipped" $R/skinny_gemm_streamk.json $R/streamk_table.json >> $R/rc.txt 2>&1 <<'PY'
import json, sys
shipped, bench, out = sys.argv[1:]
if not shipped:
    sys.exit("no table ships for this GPU")
t = json.load(open(shipped))
rows = {(r["m"], r["n"], r["k"], r.get("act")): r for r in t["rows"]}
swapped = []
for r in json.load(open(bench))["rows"]:
    timed = {k: v for k, v in r["configs"].items() if isinstance(v, float)}
    plain = [v for k, v in timed.items() if "_sp" not in k]
    sk = sorted((v, k) for k, v in timed.items() if "_sp" in k)
    key = (r["m"], r["n"], r["k"], r.get("act"))
    row = rows.get(key)
    served = row is not None and row.get("best") and (row.get("best_vs_cublas") or 1) <= 0.98
    base = timed.get(row["best"]) if served else None
    base = base if base is not None else (min(plain) if plain else None)
    print(f"[streamk] {key} cuBLAS {r['cublas_us']} shipped {row.get('best') if row else None} "
          f"base {base} best stream-K {sk[0] if sk else None}")
    if served and sk and base is not None and sk[0][0] <= 0.98 * base:
        rows[key] = dict(rows[key], best=sk[0][1], best_us=sk[0][0], best_vs_cublas=round(sk[0][0] / r["cublas_us"], 4))
        swapped.append(key)
print(f"[streamk] rows swapped: {swapped}")
if swapped:
    t["rows"] = list(rows.values())
    t["meta"]["sources"] = t["meta"].get("sources", []) + [bench]
    json.dump(t, open(out, "w"), indent=1)
PY
if [[ -f $R/streamk_table.json ]] && (( ${END:-585} - $(el) > 150 )); then
  mkdir -p $R/sc
  OUT=$R/sc TABLE=$R/streamk_table.json CONFIGS="DDTREE-15 DDTREE-15@2 DFLASH DDTREE-chain@2 DDTREE-chain" \
    AUTO="DDTREE-chain DDTREE-15" SKINNY="DDTREE-chain@2 DDTREE-15@2" CASE_TIMEOUT=150 \
    END=$(( ${END:-585} - $(date +%s) + t0 )) bash $here/../2026-12-07/call5.sh > /dev/null
  cat $R/sc/rc.txt >> $R/rc.txt; cp $R/sc/step_cost.json $R/ 2>/dev/null
fi
# At most 8 files come back: rc.txt, the bench, the table, step_cost.json, the rest in logs.tgz.
cd $R && tar czf logs.tgz t.out t b.out b sc prep.out 2>/dev/null; rm -rf t t.out b b.out sc prep prep.out
cat rc.txt
