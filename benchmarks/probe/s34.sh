#!/bin/bash
# s34's first call (benchmarks/NOTES.md, s34). The card; the Gluon checks (the forward's G
# masked as packed bf16 pairs ANDed with mask words, SEMISEP_TRITON_BITMASK, now the
# default: y bit for bit the Triton kernel's); the N = 64 / 128 16K forward with the mask
# words and with the select (BITMASK=0), three timings each; the quick checks at full size
# with the whole-state plan as the default.
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/s34.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon \
    > /tmp/keep/gluon.log 2>&1
grep -cE "^  ok" /tmp/keep/gluon.log; grep -E "BAD|Error|done" /tmp/keep/gluon.log | tail -8
timeout 150 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64,128 --Ts 16384 --impls "" \
    --repeat 3 --variants "mask:" "select:SEMISEP_TRITON_BITMASK=0" \
    --out /tmp/keep/ab > /tmp/keep/ab.log 2>&1
grep -E "^N=| vs " /tmp/keep/ab.log | cut -c1-120
timeout 150 python3 benchmarks/gpu_ssd.py --quick-checks --skip-bench --out /tmp/keep/checks \
    > /tmp/keep/checks.log 2>&1
grep -cE "^  ok" /tmp/keep/checks.log; grep -E "BAD|Error|done" /tmp/keep/checks.log | tail -8
