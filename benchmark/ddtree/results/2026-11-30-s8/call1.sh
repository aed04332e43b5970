#!/bin/bash
# Prepared in session 7 for the next session (not run yet), device call 1 (nvidia-h200): the
# radix cache with decode-time state tracking on the tiny hybrid (sglang's extra_buffer strategy
# forced for it by SGLANG_DDTREE_TEST_EXTRA_BUFFER_ARCHS, see testing/extra_buffer_arch.py):
# wy's tracked states vs sglang's per-node states (cross-check), reruns that must hit tracked
# states and match the no-speculation control; and the no_buffer cases again (DFLASH's rerun now
# records log-probs, so wy's near-tie question of session 7 gets an answer).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
SGLANG_DDTREE_GPU_CASE_TIMEOUT=400 timeout 545 bash scripts/gpu_run.sh --here --out $R/radix cases --parallel 10 \
   --only ddtree8-qwen35-wy-check-xb-radix,ddtree8-qwen35-xb-radix,ddtree8-qwen35-wy-xb-radix,dflash-qwen35-xb-radix,ddtree8-qwen35-radix,ddtree8-qwen35-wy-radix \
   > $R/radix.out 2>&1
echo "radix rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
PYTHONPATH=python python3 test/srt/gpu_cases.py check --out $R/radix/cases > $R/radix-check.txt 2>&1
cd $R && tar czf res.tgz --exclude=res.tgz radix prep && rm -rf radix prep
