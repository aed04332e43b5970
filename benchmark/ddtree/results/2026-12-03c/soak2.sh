#!/bin/bash
# nvidia-h200, ~8 min: the soak (issue 31, deliverable 5), second run. benchmark/ddtree/soak.py on
# the tiny Llama and the tiny Qwen3.5 hybrid at once (four servers on the one GPU: DDTREE and no
# speculation per model; CUDA graphs up to 32 requests, overlap scheduling on DDTREE, triton
# attention, bf16; the hybrid's DDTREE in --speculative-ddtree-gdn-mode wy), 2500 mixed requests
# each, 32 in flight per server; sending stops 200 s after both servers are up (four servers took
# ~190 s to start in soak1); then 64 greedy requests again one at a time to both servers
# (--serial-check); the leak check runs after it anyway. Since soak1: near-ties from the
# reference's top 5 (not 2), the hybrid's near-tie tolerance 0.2, top-n ties across the list's
# cut, no keep-alive. Leaves soak-llama.json, soak-qwen35.json, rc.txt and res.tgz (server logs,
# oracle files, gpu_run logs). Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
for m in llama qwen35; do
  (timeout 540 bash scripts/gpu_run.sh --here --out $R/run-$m bench benchmark/ddtree/soak.py \
     --model $m --device cuda --requests 2500 --concurrency 32 --seed 0 --timeout-s 200 \
     --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-$m.json > $R/soak-$m.out 2>&1
   echo "$m rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
   tail -1 $R/soak-$m.out >> $R/rc.txt) &
done
wait
cd $R && tar czf res.tgz --exclude=res.tgz prep prep.out run-* soak-*-work soak-*.out 2>/dev/null
rm -rf prep prep.out run-* soak-*-work soak-*.out
cat $R/rc.txt
