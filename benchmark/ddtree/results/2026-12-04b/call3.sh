#!/bin/bash
# Prepared, not run (nvidia-h200, ~6 min on a warm machine, ~8 on a fresh one: servers' Triton
# compiles): issue 31 deliverable 5, the tiny Llama's soak in bf16 as soak3 (2500 requests) after
# the chat check learnt to re-score a token whose text several ids share (soak3's 5 chat
# mismatches were lone byte tokens). soak4.sh was this with 1000 requests, cut at 225 s during
# its servers' cold start. The hybrid has no float32 run on CUDA (gemma_rmsnorm); its bf16 soak
# is soak2's. Carry the bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 540 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-llama bench benchmark/ddtree/soak.py \
   --model llama --dtype bfloat16 --device cuda --requests 2500 --concurrency 32 --seed 0 --timeout-s 300 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-llama.json > $R/soak-llama.out 2>&1
echo "llama rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
tail -1 $R/soak-llama.out >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak-llama.out soak-*-work 2>/dev/null; rm -rf prep prep.out run-* soak-*-work soak-llama.out
cat $R/rc.txt
