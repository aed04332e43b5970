#!/bin/bash
# nvidia-h100-x1 (any one-GPU kind), ~9.5 min. Prepared. Issue 32: budget auto with the evidence
# rule (core/budget_policy.py: min_samples, refresh_samples) in the engine, on the trace where the
# one-request-step policy settled on the chain (results/2026-12-07b/call5: 708 of 710 steps, 0.79x
# budget 16 pinned): results/2026-12-07b/call5.sh at this commit (the v2 GSM8K trace; DDTREE-auto
# with the chain and budgets 16 / 64 pinned, and sglang's DFLASH sized for 4, at 1 and 4
# requests). Each auto row now carries the policy's estimates and samples ("policy"). TRACE=
# benchmark/ddtree/traces/v2/mt_bench.pt for the other set. Carry the bundle and that trace only
# (assets' drafter and the other traces moved aside: the tree must stay under 64 MiB).
bash $(dirname "$0")/../2026-12-07b/call5.sh
