#!/bin/bash
# Prepared in session 11 (not run yet), device call 5 (nvidia-h200), alone on the GPU: issue 6's
# table side by side in one run with the final defaults — ours (GDN verify alone, and with the
# tree conv) beside upstream's per-node kernel in chain and tree modes, bs 1/4/16, the 16-node
# chain and budgets 16/32/64 (upstream skips shapes whose per-node snapshots pass 40 GiB: bs 16
# at budget 64 needs 146 GiB), every layer count 48. The table was measured in an earlier
# session; this puts both in one process.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout $(( 585 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --bs 1 4 16 --budgets 16 32 64 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s $(( 560 - $(date +%s) + t0 )) --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz kb prep && rm -rf prep
