#!/bin/bash
# nvidia-h100-x1, ~6 min. Prepared. In call1's gdn65 part (results/2026-12-07e/next-gdn65.sh on an
# H100) the 4 x 64 case stopped on "an illegal memory access" inside one of the launch variants
# (the default's rows at 4 x 64 had run and synchronised; the 1 x 64 case ran every variant). This
# finds which: each variant of next-gdn65.sh alone at 4 x 64 in a process of its own with
# CUDA_LAUNCH_BLOCKING=1 (a variant's failure names its kernel), then the GPU tests of the verify
# kernels (test_verify.py: twostage, PDL, 65-node trees against the float64 references).
# Carry the bundle.
R=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
for V in twostage:64:32:4:15:16 twostage:64:16:4:15:16 twostage:64:64:4:15:16 twostage:64:32:8:15:16 \
         twostage:64:32:4:15:32 twostage:64:32:4:15:64 twostage:64:32:4:15:16:8 twostage:64:32:4:15:16:2 \
         twostage:64:16:2:15:16 twostage:64:16:4:15:16:8 twostage:64:32:4:15:16:::nopdl \
         twostage:64:32:4:15:16:::nopairs twostage:64:32:4:15:16:::parts3 twostage:64:32:4:15:16:::nreg128 \
         split:16:32:4:15 fused:16:32:4:15; do
  [[ $(( $(date +%s) - t0 )) -gt 330 ]] && { echo "$V: not run (time)" >> $R/variants.txt; continue; }
  CUDA_LAUNCH_BLOCKING=1 timeout 60 bash scripts/gpu_run.sh --here --out $R/v bench benchmark/ddtree/bench_gdn_tree.py \
    --cases 4x64 --no-upstream --defaults-only --precision bf16x3 --iters 5 --variants $V \
    --out $R/v/one.json > $R/v.out 2>&1
  rc=$?
  echo "$V: rc=$rc $(grep -h -m1 -E 'illegal|Error|error' $R/v.out | cut -c1-200)" >> $R/variants.txt
  # (at most 8 files come back)
  [[ $rc != 0 && $(ls $R/fail-* 2>/dev/null | wc -l) -lt 4 ]] && cp $R/v.out "$R/fail-${V//:/_}.out"
done
timeout $(( 560 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/t test test/kernels/test_verify.py -q > $R/t.out 2>&1
echo "tests rc=$? $(tail -n 1 $R/t.out)" >> $R/variants.txt
rm -rf $R/prep $R/v $R/t $R/v.out; cat $R/variants.txt
