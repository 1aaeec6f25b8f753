#!/bin/bash
# After s32 (benchmarks/NOTES.md, "Next steps"): one call. The card; LATE_G against its
# absence at N = 64 / 128, 16K (three timings each, one process; s32 timed it on an H100
# only); the N = 128 1K-2K cells with the whole state in one span (nb0s: -22 / -37 % of the
# 1K fwd+bwd on the H100, peak 210 MB against mamba_ssm's 172), in two spans (nb0h, ~145 MB
# predicted) and in one span of chunks of 64 (nb0q, ~145 MB: half the stored states, but the
# Triton sweeps spill 592 / 472 B at n = 128, Q = 64 against 104 / 312 at Q = 32, Triton 3.6
# proxy), fla and mamba beside them; the n = 128 one-launch check (pending since s30).
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/ab_next.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 150 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64,128 --Ts 16384 --impls fla \
    --repeat 3 --variants "lateg:" "early:SEMISEP_TRITON_LATE_G=0" --out /tmp/keep/lateg \
    > /tmp/keep/lateg.log 2>&1
grep -E "^N=| vs " /tmp/keep/lateg.log | cut -c1-110
timeout 150 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --Ts 1024,2048 \
    --impls fla,mamba --repeat 3 --host --variants "default:" \
    "nb0s:SEMISEP_TRITON_BWD=NB=0,SPAN=32" "nb0h:SEMISEP_TRITON_BWD=NB=0,SPAN=16" \
    "nb0q:SEMISEP_TRITON_BWD=NB=0,Q=64,SPAN=16" \
    --out /tmp/keep/nb0 > /tmp/keep/nb0.log 2>&1
grep -E "^N=| vs " /tmp/keep/nb0.log | cut -c1-134
timeout 60 python3 benchmarks/probe/check_small128.py > /tmp/keep/check_small128.log 2>&1
tail -14 /tmp/keep/check_small128.log
