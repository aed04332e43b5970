#!/bin/bash
# nvidia-h200, ~9.5 min: the split-KV tree attention (kernels/tree_attention) on the GPU.
# (1) GPU unit tests: tree attention vs float64 and vs sglang's extend kernel at the 27B shape,
# the fused draft top-K and the sync watch re-run after their last changes; (2) the attention
# kernels alone (bench_tree_attention.py: 16 launches per graph, 27B shape, bf16); (3) step cost
# at Qwen3.6-27B shapes, dummy weights, context 8192, graphs + overlap, 1 and 16 requests,
# --phases: DDTREE-16 (split-KV, the default), DDTREE-16@2 (sglang's kernel:
# --speculative-ddtree-tree-attention backend) and DFLASH, one engine each, in one call.
# Carry build/bundle/sglang-ddtree-bundle.tar.xz (assets' drafter moved aside).
R=${OUT:?}
t0=$(date +%s)
bash scripts/gpu_run.sh --here --out $R/prep bench /dev/null > $R/prep.out 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/unit test test/kernels/test_tree_attention.py \
  test/kernels/test_draft_topk.py test/engine/test_debug_log.py > $R/unit.out 2>&1
echo "unit rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
grep -E "^(FAILED|ERROR)|passed|failed" $R/unit.out | tail -12 >> $R/rc.txt
PYTHONPATH=python:/tmp/sglang-ddtree-site timeout 100 python3 benchmark/ddtree/bench_tree_attention.py \
  --out $R/tree_attention.json > $R/ba.out 2>&1
echo "bench_tree_attention rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
tail -30 $R/ba.out >> $R/rc.txt
python3 benchmark/ddtree/qwen36_shapes.py --out /tmp/qwen36 > $R/shapes.out 2>&1
left=$(( 560 - $(date +%s) + t0 ))
timeout $left bash scripts/gpu_run.sh --here --out $R/sc bench benchmark/ddtree/step_cost.py \
  --models /tmp/qwen36 --configs DDTREE-16 DFLASH DDTREE-16@2 --concurrency 1 16 --rounds 2 \
  --prompt-len 512 --decode-tokens 32 --phases \
  --config-arg 'DDTREE-16@2:speculative_ddtree_tree_attention="backend"' \
  --ddtree-arg 'speculative_ddtree_gdn_mode="wy"' --engine-arg disable_radix_cache=true \
  --engine-arg 'attention_backend="triton"' --engine-arg 'sampling_backend="pytorch"' \
  --engine-arg disable_prefill_cuda_graph=true --engine-arg 'cuda_graph_bs_decode=[1,16]' \
  --engine-arg context_length=8192 --case-timeout-s 200 --out $R/sc/step_cost.json > $R/sc.out 2>&1
echo "step_cost rc=$? at $(( $(date +%s) - t0 )) s" >> $R/rc.txt
python3 - >> $R/rc.txt 2>&1 <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/sc/step_cost.json"))
print("meta", {k: v for k, v in d["meta"].items() if k in ("failed", "not_run_deadline", "config_args")})
for r in d["rows"]:
    print(r.get("config"), r.get("concurrency"), r.get("ms_per_step"), r.get("ms_per_step_rounds"),
          r.get("vs_dflash_step"), "phases", r.get("phase_ms"))
PY
grep -h "tree verify attention" $R/sc/*.log $R/sc.out 2>/dev/null | sort | uniq -c | head -5 >> $R/rc.txt
cd $R && tar czf res.tgz --exclude=res.tgz sc unit 2>/dev/null; rm -rf prep sc unit
