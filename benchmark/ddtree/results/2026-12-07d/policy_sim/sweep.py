# Budget auto offline over six traces x (trace order + replay_bench orders W = 1..8) at 1 / 4 / 16
# requests: auto / best fixed per cell, min and mean over the orders. Run from the repo root:
#   python sweep.py base chainpaired   (with chainpaired.diff applied to policy_sim.py) -> sweep1.txt
#   python close.py base close:close=0.05 close:close=0.1                            -> sweep2.txt
# (neither variant adopted: RESULTS 5)
import sys, itertools, statistics
sys.path.insert(0, "/work/main/benchmark/ddtree")
import policy_sim as ps
from sglang_ddtree.core.traces import TraceSet
T="/work/main/benchmark/ddtree/results"
table = ps.merged_table([f"{T}/2026-12-03c/call4b/step_cost.json", f"{T}/2026-12-04b/call1/step_cost.json"])
traces = {"v2 HumanEval":"/work/main/benchmark/ddtree/traces/v2/humaneval.pt","v2 GSM8K":"/work/main/benchmark/ddtree/traces/v2/gsm8k.pt","v2 MT-Bench":"/work/main/benchmark/ddtree/traces/v2/mt_bench.pt",
          "HumanEval":"/work/main/benchmark/ddtree/traces/humaneval.pt","GSM8K":"/work/main/benchmark/ddtree/traces/gsm8k.pt","MT-Bench":"/work/main/benchmark/ddtree/traces/mt_bench.pt"}
variants = sys.argv[1:] or ["base", "chainpaired"]
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
