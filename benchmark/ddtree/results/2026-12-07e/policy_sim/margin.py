# Budget auto's chain margin offline (results/2026-12-07d/policy_sim/sweep.py with the traces'
# folder an argument): six traces x (trace order + replay_bench orders W = 1..8) at 1 / 4 / 16
# requests, auto / best fixed per cell ("tr": trace order; min and mean over the eight replay
# orders). Run from the repo root at 4847a65 (chain margin 0.05 then):
#   python margin.py benchmark/ddtree/traces base base:chain_margin=0.02 base:chain_margin=0.0 -> margin.txt
import sys, itertools, statistics
sys.path.insert(0, "benchmark/ddtree")
import policy_sim as ps
from sglang_ddtree.core.traces import TraceSet
T="benchmark/ddtree/results"
table = ps.merged_table([f"{T}/2026-12-03c/call4b/step_cost.json", f"{T}/2026-12-04b/call1/step_cost.json"])
D = sys.argv[1]
traces = {"v2 HumanEval": f"{D}/v2/humaneval.pt", "v2 GSM8K": f"{D}/v2/gsm8k.pt", "v2 MT-Bench": f"{D}/v2/mt_bench.pt",
          "HumanEval": f"{D}/humaneval.pt", "GSM8K": f"{D}/gsm8k.pt", "MT-Bench": f"{D}/mt_bench.pt"}
variants = sys.argv[2:] or ["base"]
autos = [ps.parse_variant(v) for v in variants]
agg = {}
for name, path in traces.items():
    ts = TraceSet.load(path); cache = ps.OutcomeCache(ts.requests)
    for n in (1, 4, 16):
        orders = [("trace", list(range(len(ts.requests))), 0)] + [
            (f"w{w}",) + ps.replay_order(len(ts.requests), 8, 2, w, n) for w in range(1, 9)]
        res = {v: [] for v in variants}; tr = {}
        for oname, order, untimed in orders:
            out = ps.evaluate(ts.requests, table, autos, order, untimed, concurrency=n, cache=cache)
            b = out["best_fixed"].tokens_per_ms
            for v, r in zip(variants, out["auto"]):
                x = r.tokens_per_ms / b
                if oname == "trace": tr[v] = x
                else: res[v].append(x)
        line = f"{name:13s} {n:3d} " + "  ".join(f"{v}: tr {tr[v]:.3f} min {min(res[v]):.3f} mean {statistics.mean(res[v]):.3f}" for v in variants)
        print(line, flush=True)
        for v in variants:
            agg.setdefault((n, v), []).extend(res[v] + [tr[v]])
for (n, v), xs in sorted(agg.items()):
    print(f"all six {n:3d} {v}: min {min(xs):.3f} mean {statistics.mean(xs):.3f}")
