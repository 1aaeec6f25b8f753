#!/bin/bash
# s35's Gluon checks (benchmarks/NOTES.md, s35): the card, then the checks with the n = 128
# cases in blocks of 64 columns (SEMISEP_TRITON_BWD=NB=64) and a fifth case with the default
# plan (the whole state at once, whose sweeps are Triton's); G masked by mask words, the only
# form.
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/s35.sh" grid64 (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 150 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon \
    > /tmp/keep/gluon.log 2>&1
grep -cE "^  ok" /tmp/keep/gluon.log; grep -E "BAD|Error|done" /tmp/keep/gluon.log | tail -8
