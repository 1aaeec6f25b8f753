#!/bin/bash
# s36's H200 call (benchmarks/NOTES.md): exit 3 on another card; the Gluon checks (with the
# pairs case); the 16K forward by kernel: default, PDL, two heads a program (ring of 3, 4).
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/s36b.sh" grid64 (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 3
timeout 150 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon \
    > /tmp/keep/gluon.log 2>&1
grep -cE "^  ok" /tmp/keep/gluon.log; grep -E "BAD|Error|done" /tmp/keep/gluon.log | tail -8
timeout 150 python3 benchmarks/gpu_profile.py --Ts 16384 --variants default: \
    pdl:SEMISEP_TRITON_PDL=1 heads2:SEMISEP_TRITON_HEADS=2 \
    "heads2s4:SEMISEP_TRITON_HEADS=2;SEMISEP_PROBE_STAGES=4" default2: \
    > /tmp/keep/profile.log 2>&1
awk '/fwd:/{on=1} /fwd\+bwd:/{on=0} on' /tmp/keep/profile.log | cut -c1-110
