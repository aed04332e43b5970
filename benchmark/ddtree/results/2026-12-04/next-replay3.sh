#!/bin/bash
# Prepared, not run (nvidia-h200; each argument one call of its own): what RESULTS 6 lacks.
#   bash next-replay3.sh mt      ~9.5 min: the MT-Bench trace, DDTREE-16, DFLASH, no-spec, chain
#   bash next-replay3.sh gsm8k   ~9.5 min: the GSM8K trace, the same four
#   bash next-replay3.sh auto64  ~5 min: budget auto at 64 requests on HumanEval (replay1 cut it
#                                at its 240 s case limit: the engine's start took 138 s there)
# Combine per trace with replay_bench.py --report. Carry the bundle and the traces (assets'
# drafter moved aside).
here=$(dirname "$0")
case ${1:?mt, gsm8k or auto64} in
  mt) TRACE=benchmark/ddtree/traces/mt_bench.pt CONFIGS='DDTREE-16 DFLASH no-spec DDTREE-chain' bash $here/replay.sh ;;
  gsm8k) TRACE=benchmark/ddtree/traces/gsm8k.pt CONFIGS='DDTREE-16 DFLASH no-spec DDTREE-chain' bash $here/replay.sh ;;
  auto64) CONFIGS='DDTREE-auto' CONC='64' CASE_TIMEOUT=360 bash $here/replay.sh ;;
esac
