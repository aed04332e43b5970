"""Engine-agnostic DDTree core: tensors in, tensors out, no sglang import.

``step`` is the decode step's tensor program as the worker runs it; it calls, in order:

- ``topk``: per-depth top-K log-probabilities from draft logits, single rank and tensor-parallel
  (exact int64 sort keys from ``order_keys``);
- ``tree_builder``: best-first draft tree under a node budget (reference heap + batched);
- ``verify_layout``: tokens, positions, parents, ancestor masks and sibling links for the verify;
- ``accept``: greedy / sampled tree walk;
- ``commit_plan``: the KV window path first, the drafter context's rows and slots.

Beside them: ``widths`` (verify widths and their graphs' batch sizes), ``shadow_chain`` (what
the DFLASH chain would have accepted), ``oracle_check`` (the sequential replay of
``--speculative-ddtree-oracle-rate``), and for ``--speculative-ddtree-budget auto``
``budget_choice`` (the step-cost table and the choice rule, no torch) and ``budget_policy`` (the
running acceptance profile that feeds it). The tree GatedDeltaNet references are in
``kernels/gdn_tree/naive.py``, beside their kernels.

Every batched function is a fixed-shape tensor program with no host synchronisation, so it can
run inside a CUDA graph; each has a plain reference it is tested against.
"""
