#!/bin/bash
# Session 7, device call 4 (nvidia-h200): wy + radix cache under the cross-check: every step
# that tracks a state compares our tracked state (wy commit's tracking pass) with sglang's
# per-node state of the same node.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=220 timeout 240 bash scripts/gpu_run.sh --here --out $R/track cases --parallel 2 \
   --only ddtree8-qwen35-wy-check-radix > $R/track.out 2>&1
echo "track rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "track cross-check\|commit cross-check" $R/track/cases/ddtree8-qwen35-wy-check-radix.log | head -20 > $R/track-lines.txt
cd $R && tar czf res.tgz --exclude=res.tgz track prep && rm -rf track prep
