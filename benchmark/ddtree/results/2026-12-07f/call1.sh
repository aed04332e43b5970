#!/bin/bash
# nvidia-h100-x1 (or an H200), ~9 min. Issue 29: (a) does asking the L2 for the next product's
# weights hide the small kernels between the products (bench_l2_prefetch.py: the target's
# sequence of linear layers at M = 16 and 17 with sleep stand-ins for the norms, GatedDeltaNet
# and attention between them, the shipped H100 table's tilings; epilogue and own-kernel
# prefetch, 4-32 MiB and sized to the gap); (b) results/2026-12-07e/next-gdn65.sh (the twostage
# verify's launch alternatives at 65 nodes), with what time is left, after the prefetch's GPU test. Carry the bundle.
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 200 bash scripts/gpu_run.sh --here --out $R/pf bench benchmark/ddtree/bench_l2_prefetch.py \
  --m 16 17 --deadline-s 150 --out $R/l2_prefetch.json > $R/pf.out 2>&1
echo "prefetch rc=$? at $(( $(date +%s) - t0 )) s" > $R/rc.txt
grep -h "\[l2_prefetch\]" $R/pf.out | cut -c1-400 >> $R/rc.txt
tail -n 5 $R/pf.out | cut -c1-300 >> $R/rc.txt
timeout 90 bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_skinny_gemm.py -k prefetch -q > $R/t.out 2>&1
echo "prefetch test rc=$? at $(( $(date +%s) - t0 )) s: $(tail -n 1 $R/t.out)" >> $R/rc.txt
mkdir -p $R/gdn65
OUT=$R/gdn65 timeout $(( 560 - $(date +%s) + t0 )) bash benchmark/ddtree/results/2026-12-07e/next-gdn65.sh > $R/gdn65.out 2>&1
echo "gdn65 rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
cd $R && tar cJf logs.tar.xz pf.out t.out gdn65.out prep.out 2>/dev/null; rm -rf prep pf t pf.out t.out gdn65.out prep.out
cat $R/rc.txt
