#!/bin/bash
# nvidia-h100-x1, ~5 min. Prepared. Issue 29's DDTREE-64 goal (0.95x DFLASH at one request, 0.983x
# in RESULTS 3): its step's extra over DDTREE-16 is the 65-node GatedDeltaNet and attention, not
# the GEMMs (the M = 65 tail tiles did not pay, results/2026-12-07e/call1). The twostage verify's
# launch rules (kernels/gdn_tree/heuristics.py) were measured on an H200; this times the
# alternatives on the H100 at 65 nodes, 1 and 4 trees, CUDA graphs, bf16x3: value tile, pair
# tile, warps of the apply and of the prep, PDL, pairs in the prep, the register limit, and the
# other impls, beside the defaults and a per-kernel profile. A variant >= 5% under the default
# at 1 x 64 is a rule to change (then the in-engine step A/B). Carry the bundle.
R=${OUT:?}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
V="twostage:64:32:4:15:16 twostage:64:16:4:15:16 twostage:64:64:4:15:16 twostage:64:32:8:15:16
   twostage:64:32:4:15:32 twostage:64:32:4:15:64 twostage:64:32:4:15:16:8 twostage:64:32:4:15:16:2
   twostage:64:16:2:15:16 twostage:64:16:4:15:16:8 twostage:64:32:4:15:16:::nopdl
   twostage:64:32:4:15:16:::nopairs twostage:64:32:4:15:16:::parts3 twostage:64:32:4:15:16:::nreg128
   split:16:32:4:15 fused:16:32:4:15"
timeout 280 bash scripts/gpu_run.sh --here --out $R/kb bench benchmark/ddtree/bench_gdn_tree.py \
  --cases 1x64 4x64 --no-upstream --defaults-only --precision bf16x3 --iters 30 \
  --variants $V --profile-impls twostage --deadline-s 200 --out $R/gdn65.json > $R/kb.out 2>&1
echo "bench rc=$?" > $R/rc.txt
tail -n 40 $R/kb.out | cut -c1-300 >> $R/rc.txt
rm -rf $R/prep $R/kb; cat $R/rc.txt
