# What budget auto's exploration costs in trace order at 16 requests: the steps before every candidate
# has min_samples request-steps, charged at their cost over the best fixed choice's. Run from the
# repo root: python explore.py > explore.txt (at 3d4ee7b)
import sys
sys.path.insert(0, "benchmark/ddtree")
import policy_sim as ps
from sglang_ddtree.core import budget_policy as bp
from sglang_ddtree.core.traces import TraceSet
T = "benchmark/ddtree/results"
table = ps.merged_table([f"{T}/2026-12-03c/call4b/step_cost.json", f"{T}/2026-12-04b/call1/step_cost.json"])
for path in ["v2/humaneval", "v2/gsm8k", "v2/mt_bench", "humaneval", "gsm8k", "mt_bench"]:
    ts = TraceSet.load(f"benchmark/ddtree/traces/{path}.pt"); cache = ps.OutcomeCache(ts.requests)
    log = []
    class P(bp.BudgetPolicy):
        def choose(self, bs):
            explored = self._explored(self.candidates_at(bs))
            c = super().choose(bs); log.append((bs, c, explored)); return c
    r = ps.serve(cache, table, policy=P(table=table), concurrency=16)
    fixed = max((ps.serve(cache, table, pin=c, concurrency=16) for c in ps.fixed_choices(table, 16)), key=lambda x: x.tokens_per_ms)
    best = fixed.label if fixed.label == "chain" else int(fixed.label)
    extra = sum(table.cost(c, bs) - table.cost(best, bs) for bs, c, e in log if not e)
    n = sum(1 for _, _, e in log if not e)
    print(f"{path:14s} auto/best {r.tokens_per_ms / fixed.tokens_per_ms:.3f} exploration steps {n} extra ms {extra:.0f} of {r.ms:.0f} = {extra / r.ms:.1%}")
