#!/bin/bash
# Session 16, device call 4 (nvidia-h200, alone on the GPU, ~7.5 min): issue 6's remaining cells after
# the harness fix (upstream's GDN kernel timed alone now gets each node's parent from the layout;
# call 1 hit an illegal address at 64x16 reading uninitialised parents). First the cells with no
# upstream number yet (conv + GDN up to 65 nodes, GDN alone above), then upstream's GDN alone again
# for the smaller tree cells (session 15 / call 1 timed it with uninitialised parents).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout $(( 440 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
   --cases 64x16 64x32 64x64 4x128 16x128 64x128 1x256 4x256 16x256 64x256 \
           1x16 1x32 1x64 1x128 4x16 4x32 4x64 16x16 16x32 16x64 \
   --defaults-only --upstream-conv-max-nodes 65 --precision bf16x3 --alt-precisions --alt-impls \
   --deadline-s $(( 400 - $(date +%s) + t0 )) --out $R/kb/gdn.json > $R/kb.out 2>&1
echo "kb rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep kb && rm -rf prep
