#!/bin/bash
# s35's first call (benchmarks/NOTES.md, s35). The card; the Gluon checks (the n = 128 cases
# in blocks of 64 columns by chunk_size=64, and a fifth case with the default plan: the whole
# state at once, whose sweeps are Triton's); the N = 64 / 128 16K forward with the mask words
# (SEMISEP_TRITON_BITMASK, the default) and with the select (BITMASK=0), three timings each.
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/s35.sh" grid128 (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 150 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon \
    > /tmp/keep/gluon.log 2>&1
grep -cE "^  ok" /tmp/keep/gluon.log; grep -E "BAD|Error|done" /tmp/keep/gluon.log | tail -8
timeout 170 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64,128 --Ts 16384 --impls "" \
    --repeat 3 --variants "mask:" "select:SEMISEP_TRITON_BITMASK=0" \
    --out /tmp/keep/ab > /tmp/keep/ab.log 2>&1
grep -E "^N=| vs " /tmp/keep/ab.log | cut -c1-120
