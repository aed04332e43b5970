#!/bin/bash
# nvidia-h100-x1 (the card of the shipped table), ~9 min. Prepared, not run. Issue 29: does the few-token GEMM's
# in_proj_ba (N = 96, split-K 8 and a sum kernel, on sglang's second stream beside in_proj_qkvz)
# cost the step more than cuBLAS's? In call12's profile its 48 sum kernels took 0.94 ms of device
# time a step (a 16 x 96 sum each: the side stream's kernels wait for SMs the main stream's GEMM
# holds, so their duration says little about the critical path); an A/B in one run answers it.
# call5.sh at one request, --profile: sglang's DFLASH, the chain and DDTREE-15 with the shipped
# table (auto), and again with the same table less its in_proj_ba rows (cuBLAS there). Carry the
# bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
here=$(dirname "$0")
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
shipped=$(PYTHONPATH=python python3 -c "import sys; from sglang_ddtree.kernels.gemm_table import shipped_table
print(shipped_table(sys.argv[1]) or '')" "$gpu")
[[ -n $shipped ]] || { echo "no table shipped for $gpu: run call12.sh there first" | tee $R/rc.txt; exit 2; }
python3 - "$shipped" $R/no_ba.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for r in t["rows"]:
    if r["n"] == 96:  # in_proj_ba
        r["best"], r["best_vs_cublas"] = None, None
json.dump(t, open(sys.argv[2], "w"), indent=1)
PY
mkdir -p $R/sc
OUT=$R/sc TABLE=$R/no_ba.json CONFIGS="DFLASH DDTREE-chain DDTREE-chain@2 DDTREE-15 DDTREE-15@2" \
  AUTO="DDTREE-chain DDTREE-15" SKINNY="DDTREE-chain@2 DDTREE-15@2" CASE_TIMEOUT=150 EXTRA=--profile \
  END=${END:-560} bash $here/call5.sh > /dev/null
cp $R/sc/rc.txt $R/rc.txt; cp $R/sc/step_cost.json $R/
cd $R && tar czf logs.tgz sc 2>/dev/null; rm -rf sc; cat rc.txt
