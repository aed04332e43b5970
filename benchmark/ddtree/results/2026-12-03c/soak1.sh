#!/bin/bash
# nvidia-h200, ~6 min: the soak (issue 31, deliverable 5). benchmark/ddtree/soak.py on the tiny
# Llama and the tiny Qwen3.5 hybrid at once (four servers on the one GPU: DDTREE and no
# speculation per model; CUDA graphs up to 32 requests, overlap scheduling, triton attention,
# bf16; the hybrid's DDTREE in --speculative-ddtree-gdn-mode wy), 2500 mixed requests each, 32 in
# flight per server; sending stops 250 s after each soak starts, the leak check runs after it
# anyway. Leaves soak-llama.json, soak-qwen35.json (the summaries), rc.txt (exit codes and
# summary lines) and res.tgz (server logs, oracle files, gpu_run logs). Carry the bundle (assets'
# drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
for m in llama qwen35; do
  (timeout 330 bash scripts/gpu_run.sh --here --out $R/run-$m bench benchmark/ddtree/soak.py \
     --model $m --device cuda --requests 2500 --concurrency 32 --seed 0 --timeout-s 250 \
     --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-$m.json > $R/soak-$m.out 2>&1
   echo "$m rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
   tail -1 $R/soak-$m.out >> $R/rc.txt) &
done
wait
cd $R && tar czf res.tgz --exclude=res.tgz prep prep.out run-* soak-*-work soak-*.out 2>/dev/null
rm -rf prep prep.out run-* soak-*-work soak-*.out
cat $R/rc.txt
