#!/bin/bash
# The H200 call (benchmarks/NOTES.md, s36; reordered in s37 for a short call), the cells that
# issue 5 still has at stake first, each step's files kept if the call is cut: N = 64 16K and
# N = 128 1K / 8K with the anchors (each twice); the host-bound N = 64 2K / 4K; the 16K
# forward by kernel (default, PDL); the other cells; the Gluon checks.
# Run: nvidia-smi ... | grep -q H200 || exit 3; bash benchmarks/device_run.sh
#      "bash benchmarks/probe/s36b.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
grid() {  # grid NAME NS TS REPEAT
  python3 benchmarks/gpu_ssd.py --skip-checks --Ns $2 --Ts $3 --impls mamba,fla --repeat $4 \
      --host --out /tmp/keep/$1 > /tmp/keep/$1.log 2>&1
  grep -E "^N=" /tmp/keep/$1.log | cut -c1-134
  tar czf $OUT/keep.tgz -C /tmp/keep .
}
grid grid64a 64 16384 2
grid grid128a 128 1024,8192 2
grid grid64b 64 2048,4096 2
timeout 100 python3 benchmarks/gpu_profile.py --Ts 16384 --variants default: \
    pdl:SEMISEP_TRITON_PDL=1 default2: pdl2:SEMISEP_TRITON_PDL=1 \
    > /tmp/keep/profile.log 2>&1
awk '/fwd:/{on=1} /fwd\+bwd:/{on=0} on' /tmp/keep/profile.log | cut -c1-110
tar czf $OUT/keep.tgz -C /tmp/keep .
grid grid64c 64 1024,8192 1
grid grid128b 128 2048,4096,16384 1
bash benchmarks/probe/s35.sh
