# Budget auto's chain margin under step-cost-table noise. policy_sim charges the table it chooses
# from, so a lower margin cannot lose there to the cross-engine noise the margin guards against.
# Here the policy chooses from a perturbed table (each config's row scaled by 1 + e, e uniform in
# +-NOISE, one draw per config, the same at every concurrency: rows come from separate engines)
# and the run is charged the true table. Variants: chain margin M, and "guard" (a tree is chosen
# over the chain only if its expected accepted drafts exceed the chain's). Six traces x (trace
# order + replay orders W = 1, 4) x DRAWS noise draws, auto / best fixed (true table).
# Run from the repo root at 4847a65: python noise.py benchmark/ddtree/traces 0.03 4 > noise3.txt, and 0.06 4 > noise6.txt
import random, statistics, sys
sys.path.insert(0, "benchmark/ddtree")
import policy_sim as ps
from sglang_ddtree.core import budget_choice as bc, budget_policy as bp
from sglang_ddtree.core.budget_choice import CHAIN, StepCostTable
from sglang_ddtree.core.traces import TraceSet

base_best = bc.best_choice


def guarded(table, expected, bs, candidates, chain_margin=bc.CHAIN_MARGIN):
    c = base_best(table, expected, bs, candidates, chain_margin)
    if c != CHAIN and CHAIN in candidates and expected[c] <= expected[CHAIN]:
        return CHAIN
    return c


class Guarded(bp.BudgetPolicy):
    def choose(self, bs):
        bp.best_choice = guarded
        try:
            return super().choose(bs)
        finally:
            bp.best_choice = base_best


tdir = sys.argv[1]
NOISE = float(sys.argv[2]) if len(sys.argv) > 2 else 0.03
DRAWS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
T = "benchmark/ddtree/results"
true = ps.merged_table([f"{T}/2026-12-03c/call4b/step_cost.json", f"{T}/2026-12-04b/call1/step_cost.json"])
variants = [("m0.05", bp.BudgetPolicy, 0.05), ("m0.02", bp.BudgetPolicy, 0.02), ("m0", bp.BudgetPolicy, 0.0),
            ("guard m0.02", Guarded, 0.02), ("guard m0", Guarded, 0.0)]
traces = {"v2 HumanEval": "v2/humaneval.pt", "v2 GSM8K": "v2/gsm8k.pt", "v2 MT-Bench": "v2/mt_bench.pt",
          "HumanEval": "humaneval.pt", "GSM8K": "gsm8k.pt", "MT-Bench": "mt_bench.pt"}
rng = random.Random(0)
draws = [None] + [{c: 1 + rng.uniform(-NOISE, NOISE) for c in true.ms} for _ in range(DRAWS)]
agg = {}
for name, rel in traces.items():
    ts = TraceSet.load(f"{tdir}/{rel}")
    cache = ps.OutcomeCache(ts.requests)
    for n in (1, 4, 16):
        orders = [(list(range(len(ts.requests))), 0)] + [ps.replay_order(len(ts.requests), 8, 2, w, n) for w in (1, 4)]
        cells = {v[0]: [] for v in variants}
        for order, untimed in orders:
            run = dict(order=order, untimed=untimed, concurrency=n)
            best = max(ps.serve(cache, true, pin=c, **run).tokens_per_ms for c in ps.fixed_choices(true, n))
            for d in draws:
                seen = true if d is None else StepCostTable({c: {k: v * d[c] for k, v in r.items()} for c, r in true.ms.items()})
                for label, cls, m in variants:
                    pol = cls(table=seen, chain_margin=m)
                    r = ps.serve(cache, true, policy=pol, **run)
                    cells[label].append(r.tokens_per_ms / best)
        print(f"{name:13s} {n:3d} " + "  ".join(f"{k}: {min(v):.3f}/{statistics.mean(v):.3f}" for k, v in cells.items()), flush=True)
        for k, v in cells.items():
            agg.setdefault((n, k), []).extend(v)
for (n, k), v in sorted(agg.items()):
    print(f"all six {n:3d} {k:12s} min {min(v):.3f} mean {statistics.mean(v):.3f}")
