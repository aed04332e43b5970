# The "close call" variant: a refresh whose budget comes within `close` of the choice's value
# resets the refresh interval instead of doubling it. Run: python close.py base close:close=0.05
import sys
sys.path.insert(0, "/work/main/benchmark/ddtree")
import policy_sim as ps
from sglang_ddtree.core.budget_policy import BudgetPolicy, CHAIN, best_choice

class ClosePolicy(BudgetPolicy):
    close: float = 0.1
    def __init__(self, *a, close=0.1, **kw):
        super().__init__(*a, **kw); self.close = close; self._refreshed = None; self._bs = 1
    def choose(self, bs):
        # capture the refreshed candidate and judge with closeness
        judging = self._judge_at is not None and self.steps + 1 >= self._judge_at
        if judging:
            cands = self.candidates_at(bs)
            best = best_choice(self.table, self._mean, bs, cands, self.chain_margin)
            r = self._refreshed
            if r is not None and r in cands and best != r and self._mean.get(r) is not None:
                v = lambda c: (self._mean[c] + 1) / self.table.cost(c, bs)
                if v(r) >= (1 - self.close) * v(best):
                    # close call: judge as a change (interval reset) without changing the choice
                    self._before = None
        out = super().choose(bs)
        if self._burst is not None:
            self._refreshed = self._burst
        return out
ps.VARIANTS["close"] = ClosePolicy
ps.POLICY_KEYS["close"] = float
exec(open(__file__.replace("close.py", "sweep.py")).read().replace("import policy_sim as ps", "").replace("sys.path.insert(0, \"/work/main/benchmark/ddtree\")", ""))
