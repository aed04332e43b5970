#!/bin/bash
# nvidia-h100-x1 (the card of the shipped table), ~9.5 min. Prepared. Issue 29 at 2 and 4
# requests: the shipped H100 GEMM table has rows for 16, 17 and 65 tokens only, so the verify
# widths of 2 and 4 requests (32 / 34 / 64 / 68 tokens) run on cuBLAS. results/2026-12-07b/call7
# found per-shape tilings 2-23% under cuBLAS there (the 64-layer sequence 0.7-1.1 ms cheaper at
# 32 / 34 / 64 tokens alone). Does that carry into the engine? The shipped table plus call7's rows
# ($R/m32_table.json; gemm_table.load_table keeps only rows at least 2% under cuBLAS) for the @2
# configurations, the shipped table (auto) for the others: sglang's DFLASH, DDTREE-15 and
# DDTREE-16 with and without the rows, at 2 and 4 requests, results/2026-12-06b/call2.sh's settings
# (decode graphs [2, 4], two timed rounds of 32 tokens, --phases). Carry the bundle (assets'
# drafter and the traces moved aside).
R=${OUT:?}
T=benchmark/ddtree/results
python3 - python/sglang_ddtree/kernels/gemm_tables/nvidia_h100_80gb_hbm3.json \
  $T/2026-12-07b/call7/skinny_gemm_m32_m64.json $R/m32_table.json <<'PY'
import json, sys
t, extra = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
have = {(r["m"], r["n"], r["k"], r.get("act")) for r in t["rows"]}
add = []
for r in extra["rows"]:
    if (r["m"], r["n"], r["k"], r.get("act")) in have:
        continue
    # The best plain tiling (call7 also timed stream-K grids, since removed from the kernel).
    plain = sorted((v, k) for k, v in r["configs"].items() if isinstance(v, float) and "_sp" not in k)
    if plain:
        add.append(dict(r, best=plain[0][1], best_us=plain[0][0],
                        best_vs_cublas=round(plain[0][0] / r["cublas_us"], 4)))
t["rows"] += add
t["meta"]["sources"] = t["meta"].get("sources", []) + [sys.argv[2]]
json.dump(t, open(sys.argv[3], "w"), indent=1)
print(f"[m32] {len(add)} rows added, {sum(1 for r in add if r.get('best') and r['best_vs_cublas'] <= 0.98)} under 0.98x cuBLAS")
PY
CONC="2 4" GRAPHS="[2,4]" CONFIGS="DFLASH DDTREE-15 DDTREE-15@2 DDTREE-16@2 DDTREE-16" \
  SWEEP="--config-arg DDTREE-15@2:speculative_ddtree_gemm_table=\"$R/m32_table.json\"
         --config-arg DDTREE-16@2:speculative_ddtree_gemm_table=\"$R/m32_table.json\"" \
  bash $(dirname "$0")/../2026-12-06b/call2.sh
