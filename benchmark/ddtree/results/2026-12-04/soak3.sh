#!/bin/bash
# nvidia-h200, ~9 min: the soak's third run (issue 31, deliverable 5) and
# the hybrid's divergence in float32. (1) soak.py on the tiny Llama in bf16 (near-tie tolerance
# now one bf16 step, 0.0625) and on the tiny Qwen3.5 hybrid in float32 (in bf16 every
# speculative algorithm, sglang's DFLASH included, leaves plain decoding there at the same
# positions: div1), 2500 requests each as soak2; (2) then divergence.py on the hybrid in float32
# (plain vs DFLASH, DDTREE chain / 16 wy / 16 snapshot / oracle). Carry the bundle (assets'
# drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
for m in llama:bfloat16 qwen35:float32; do
  (timeout 480 bash scripts/gpu_run.sh --here --out $R/run-${m%%:*} bench benchmark/ddtree/soak.py \
     --model ${m%%:*} --dtype ${m##*:} --device cuda --requests 2500 --concurrency 32 --seed 0 --timeout-s 200 \
     --request-timeout-s 60 --idle-timeout-s 30 --out $R/soak-${m%%:*}.json > $R/soak-${m%%:*}.out 2>&1
   echo "$m rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
   tail -1 $R/soak-${m%%:*}.out >> $R/rc.txt) &
done
wait
timeout $(( 580 - $(date +%s) + t0 )) bash scripts/gpu_run.sh --here --out $R/div bench benchmark/ddtree/divergence.py \
  --model qwen35 --dtype float32 --tol 0.01 --prompts 48 --out $R/divergence-qwen35-fp32.json > $R/div.out 2>&1
echo "div rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep "\[divergence\]" $R/div.out >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep prep.out run-* div div.out soak-*-work divergence-*-work soak-*.out 2>/dev/null
rm -rf prep prep.out run-* div div.out soak-*-work divergence-*-work soak-*.out
cat $R/rc.txt
