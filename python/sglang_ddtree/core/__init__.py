"""Engine-agnostic DDTree core: tensors in, tensors out, no sglang import.

Modules, in the order a decode step uses them:

- ``order_keys``: exact int64 sort keys (fp32 value + deterministic tie-break fields).
- ``topk``: per-depth top-K log-probabilities from draft logits, single rank and tensor-parallel.
- ``tree_builder``: best-first draft tree under a node budget (reference heap + batched).
- ``verify_layout``: tokens, positions, parents, ancestor masks and sibling links for verify.
- ``accept``: greedy / sampled tree walk, stop tokens and max-new-tokens truncation.
- ``commit_plan``: KV slot moves/remaps and the hidden-state gather for the accepted path.

Beside them: ``step`` (draft logits -> verify layout and target tokens -> commit plan, each one
capturable program), ``shadow_chain`` (what the DFLASH chain would have accepted), ``oracle_check`` (the sequential
replay of ``--speculative-ddtree-oracle-rate``), and for ``--speculative-ddtree-budget auto``
``budget_choice`` (the step-cost table and the choice rule, no torch) and ``budget_policy`` (the
running acceptance profile that feeds it).

Every batched function is a fixed-shape tensor program with no host synchronisation, so it
can run inside a CUDA graph; each has a plain reference it is tested against.
"""
