#!/bin/bash
# issue 32 d3: the MT-Bench trace replayed at 27B shapes (next-replay3.sh mt of 2026-12-04).
bash benchmark/ddtree/results/2026-12-04/next-replay3.sh mt
