"""Test-only oracle drafter: per-depth candidates built from the target's own greedy
continuation, with the true token placed where the test chooses.

Activated by ``SGLANG_DDTREE_TEST_ORACLE=<json file>`` (the test plugin, ``testing/plugin.py``,
hooks the worker's draft in the scheduler process), with content::

    {"mode": "first" | "sibling" | "nowhere",
     "continuations": {"<comma-joined prompt ids>": [greedy output ids of the target]}}

Modes, for a request whose committed output has length j (its last token is the tree root):
- ``first``: at every depth d the true token ``cont[j + d - 1]`` is rank 0 (p = 0.9): with a
  budget >= L the tree holds the whole true path, and every step accepts L drafts.
- ``sibling``: at depth 1 the true token is rank 1 (p = 0.05) under a wrong rank 0 (p = 0.9);
  deeper depths put their true token at rank 0. With budget L + 1 the tree is the rank-0 chain
  plus the depth-1 rank-1 node, so every step accepts exactly 1 draft, a non-first sibling.
- ``nowhere``: the true token is never among the candidates: every step accepts 0.
Past the end of the known continuation the candidates are arbitrary (nothing to match).
Wrong candidates are drawn from tokens that differ from the true one.

The file is read again whenever its modification time changes (checked at every draft), so a
client may write the continuations after the server started (benchmark/ddtree/soak.py):
:func:`write_oracle_file` writes it atomically (a rename).
"""

from __future__ import annotations

import json
import math
import os

import torch


MODES = ("first", "sibling", "nowhere")


def write_oracle_file(path, mode: str, continuations) -> None:
    """Write the oracle file at ``path`` atomically (a temporary beside it, then a rename):
    ``continuations`` maps each prompt (a sequence of ids) to the target's greedy output ids,
    as a dict or as ``(prompt, output)`` pairs. Raises ValueError for an unknown ``mode``."""
    if mode not in MODES:
        raise ValueError(f"oracle mode {mode!r} (one of {', '.join(MODES)})")
    pairs = continuations.items() if isinstance(continuations, dict) else continuations
    data = {"mode": mode, "continuations": {",".join(map(str, p)): [int(t) for t in c] for p, c in pairs}}
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


class OracleDrafter:
    def __init__(self, path: str):
        self.path = path
        self._mtime = None
        self._load()

    def _load(self) -> None:
        """(Re)read the file if its modification time changed since the last read."""
        mtime = os.stat(self.path).st_mtime_ns
        if mtime == self._mtime:
            return
        with open(self.path) as f:
            data = json.load(f)
        if data["mode"] not in MODES:
            raise ValueError(f"oracle mode {data['mode']!r}")
        self.mode = data["mode"]
        self.cont = {k: list(v) for k, v in data["continuations"].items()}
        self._mtime = mtime

    def topk(self, reqs, L: int, K: int, vocab: int, device, prefix_lens=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``[bs, L, K]`` log-probs (sorted descending) and ids for the batch's requests.

        ``prefix_lens`` (the batch's committed KV lengths) gives each request's output length
        as ``prefix - prompt + 1``; under overlap scheduling ``req.output_ids`` runs one step
        behind the device, so the host list cannot be used there."""
        if prefix_lens is not None:
            prefix_lens = [int(x) for x in prefix_lens.tolist()]  # one host read, test-only
        if K < 3:
            raise ValueError("the oracle drafter needs --speculative-ddtree-topk >= 3")
        self._load()
        bs = len(reqs)
        probs = [0.9, 0.05] + [0.05 / (K - 2)] * (K - 2)
        lp = torch.tensor([math.log(p) for p in probs], dtype=torch.float32).expand(bs, L, K).clone()
        ids = torch.empty(bs, L, K, dtype=torch.int64)
        for b, req in enumerate(reqs):
            cont = self.cont.get(",".join(map(str, req.origin_input_ids)), [])
            if prefix_lens is not None:
                j = prefix_lens[b] - len(req.origin_input_ids) + 1
            else:
                j = len(req.output_ids)
            for d in range(1, L + 1):
                i = j + d - 1
                true = cont[i] if i < len(cont) else None
                wrong = [t for t in range(min(K + 1, vocab)) if t != true][:K]
                row = list(wrong)
                if true is not None:
                    if self.mode == "first" or (self.mode == "sibling" and d > 1):
                        row[0] = true
                    elif self.mode == "sibling":
                        row[1] = true
                ids[b, d - 1] = torch.tensor(row[:K])
        return lp.to(device), ids.to(device)
