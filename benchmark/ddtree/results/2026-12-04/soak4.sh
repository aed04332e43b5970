#!/bin/bash
# nvidia-h200, ~4 min (what this session's device time had left): the tiny Llama's soak in bf16,
# 1000 requests, after soak3's chat mismatches were traced to the chat check matching DDTREE's
# token by text (every lone byte of the byte-level vocabulary decodes to U+FFFD): such
# differences are now re-scored by id on the reference server (soak.check, rescore). Carry the
# bundle (assets' drafter and the traces moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout $(( 225 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/run-llama bench benchmark/ddtree/soak.py \
   --model llama --dtype bfloat16 --device cuda --requests 1000 --concurrency 32 --seed 1 --serial-check 16 --timeout-s 150 \
   --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-llama.json > $R/soak-llama.out 2>&1
echo "llama rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
tail -1 $R/soak-llama.out >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz soak-llama.out soak-*-work 2>/dev/null; rm -rf prep prep.out run-* soak-*-work soak-llama.out
cat $R/rc.txt
