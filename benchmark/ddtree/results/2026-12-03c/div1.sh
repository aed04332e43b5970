#!/bin/bash
# nvidia-h200, ~5 min: does DDTREE leave plain greedy decoding on the tiny hybrid more than
# sglang's own DFLASH does? benchmark/ddtree/divergence.py: six servers on the tiny Qwen3.5
# hybrid (plain, DFLASH, DDTREE-chain, DDTREE-16 wy, DDTREE-16 snapshot, DDTREE-16 wy with the
# oracle drafter), the soak's first 48 greedy prompts, 96 tokens each, one request at a time.
# Carry the bundle (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
echo "prep rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
timeout 420 bash scripts/gpu_run.sh --here --out $R/run bench benchmark/ddtree/divergence.py \
  --model qwen35 --prompts 48 --out $R/divergence-qwen35.json > $R/div.out 2>&1
echo "div rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep "\[divergence\]" $R/div.out >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz prep.out run div.out divergence-qwen35-work 2>/dev/null
rm -rf prep prep.out run div.out divergence-qwen35-work
cat $R/rc.txt
