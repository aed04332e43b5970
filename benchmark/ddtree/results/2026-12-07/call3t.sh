#!/bin/bash
# Any one-GPU kind, ~1.5 min (the device time left): the step statistics kernel's GPU tests
# (test/core/test_gpu.py: tree_cuda.step_stats against the torch forms, and the step program free
# of host synchronisation). Carry the bundle built from this commit.
R=${OUT:?}
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
timeout 150 bash scripts/gpu_run.sh --here --out $R/t test test/core/test_gpu.py > $R/t.out 2>&1
echo "tests rc=$?" >> $R/rc.txt
grep -E "passed|failed|^FAILED|^ERROR|Error" $R/t.out | tail -20 >> $R/rc.txt
cd $R && tar czf t.tgz t.out t 2>/dev/null; rm -rf t t.out
cat $R/rc.txt
