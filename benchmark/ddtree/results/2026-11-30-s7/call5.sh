#!/bin/bash
# Session 7, device call 5 (nvidia-h200, last ~4 minutes of the budget): after the worker
# rebuilds the tracking slots before each verify (worker.prepare_state_tracking; call 4 showed
# none were set: batch.mamba_track_indices stayed None, as in sglang's DFLASH), the wy tracked
# state vs sglang's per-node state under the cross-check.
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=170 timeout 180 bash scripts/gpu_run.sh --here --out $R/track cases --parallel 2 \
   --only ddtree8-qwen35-wy-check-radix > $R/track.out 2>&1
echo "track rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -h "track cross-check" $R/track/cases/ddtree8-qwen35-wy-check-radix.log | head -40 > $R/track-lines.txt
cd $R && tar czf res.tgz --exclude=res.tgz track prep && rm -rf track prep
