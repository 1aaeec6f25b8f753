#!/bin/bash
# s36 (benchmarks/NOTES.md): the card; the Gluon checks (a sixth case: two heads a program);
# the 16K and 4K forward by kernel: one head / two heads a program (ring of 3, 4), and the
# probes without B and C past the first chunks / without y (wrong y: what they cost);
# then the copy probe with B and C read beside x.
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/s36.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 150 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon \
    > /tmp/keep/gluon.log 2>&1
grep -cE "^  ok" /tmp/keep/gluon.log; grep -E "BAD|Error|done|pairs" /tmp/keep/gluon.log | tail -30
timeout 200 python3 benchmarks/gpu_profile.py --Ts 16384,4096 --variants default: \
    heads2:SEMISEP_TRITON_HEADS=2 "heads2s4:SEMISEP_TRITON_HEADS=2;SEMISEP_PROBE_STAGES=4" \
    bc:SEMISEP_PROBE_FWD=1 noy:SEMISEP_PROBE_FWD=2 default2: heads2b:SEMISEP_TRITON_HEADS=2 \
    > /tmp/keep/profile.log 2>&1
awk '/fwd:/{on=1} /fwd\+bwd:/{on=0} on' /tmp/keep/profile.log | cut -c1-110
timeout 100 python3 benchmarks/probe/copy_pattern.py > /tmp/keep/copy.log 2>&1; cat /tmp/keep/copy.log
