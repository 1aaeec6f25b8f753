#!/bin/bash
# s34's first call (benchmarks/NOTES.md, s34). The card; the quick checks at full size with
# the whole-state plan as the default (once, on any card); on an H200 the 16K forward
# (<= 0.40 ms, three timings) and the N = 128 grid with mamba_ssm and fla beside it.
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/s34.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 200 python3 benchmarks/gpu_ssd.py --quick-checks --skip-bench --out /tmp/keep/checks \
    > /tmp/keep/checks.log 2>&1
tail -30 /tmp/keep/checks.log
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 100 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64 --Ts 16384 --impls "" \
      --repeat 3 --out /tmp/keep/f16k > /tmp/keep/f16k.log 2>&1
  grep -E "^N=" /tmp/keep/f16k.log | cut -c1-110
  timeout 280 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --impls mamba,fla \
      --out /tmp/keep/grid128 > /tmp/keep/grid128.log 2>&1
  grep -E "^N=" /tmp/keep/grid128.log | cut -c1-104
fi
