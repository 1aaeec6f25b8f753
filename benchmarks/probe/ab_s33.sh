#!/bin/bash
# s33's second call (benchmarks/NOTES.md, s33). The card; on an H200 the issue's 16K forward
# (<= 0.40 ms) with LATE_G on / off; the N = 128 1K-2K plans: the default (since s33 at 1K
# the whole state in one span of chunks of 64, config.whole_state: nb0q's plan), the blocks
# of 64 (the default before), nb0h (the whole state in two spans of chunks of 32), nb0q, fla
# beside them, four timings a cell; the n = 128 one-launch check against float64 (its
# reference runs on the CPU: ~60 s), default and blocks. As run in s33-2 (1b2b05d) it first
# profiled the pre-pass at 1 / 2 / 4 / 8 chunks a program (a knob since removed: no gain).
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/ab_s33.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 100 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64 --Ts 16384 --impls "" \
      --repeat 3 --variants "lateg:" "early:SEMISEP_TRITON_LATE_G=0" \
      --out /tmp/keep/f16k > /tmp/keep/f16k.log 2>&1
  grep -E "^N=| vs " /tmp/keep/f16k.log | cut -c1-110
fi
timeout 240 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --Ts 1024,2048 \
    --impls fla --repeat 4 --host --variants "default:" "blocks:SEMISEP_TRITON_BWD=NB=64" \
    "nb0h:SEMISEP_TRITON_BWD=NB=0,Q=32,SPAN=16" "nb0q:SEMISEP_TRITON_BWD=NB=0,Q=64,SPAN=16" \
    --out /tmp/keep/nb0 > /tmp/keep/nb0.log 2>&1
grep -E "^N=| vs " /tmp/keep/nb0.log | cut -c1-134
timeout 150 python3 benchmarks/probe/check_small128.py > /tmp/keep/check_small128.log 2>&1
tail -14 /tmp/keep/check_small128.log
SEMISEP_TRITON_BWD=NB=64 timeout 120 python3 benchmarks/probe/check_small128.py \
    > /tmp/keep/check_small128_blocks.log 2>&1
tail -14 /tmp/keep/check_small128_blocks.log
