#!/bin/bash
# s38's second H200 call (benchmarks/NOTES.md, s38): the N = 64 forward with the exact launch
# on a side stream (the default at 16K, gluon_fwd.exact_aside) against it after the Gluon
# launch (SEMISEP_TRITON_EXACT_ASIDE=0), three timings each, y and the gradients checked
# against the default's; the host-bound N = 64 1K / 2K cells, three timings; the N = 128
# cells the first call did not reach, with the anchors; the Gluon checks; both 16K variants
# on the device's clock (probe/timeline.py). The at-stake cells first (s39); the 1K / 2K cells
# against fla only (s40: mamba_ssm's first-call compiles cost minutes; s38-1 has it 3.5x behind).
# Run: nvidia-smi ... | grep -q H200 || exit 3; bash benchmarks/device_run.sh
#      "bash benchmarks/probe/s38.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64 --Ts 16384 --impls '' --repeat 3 --host \
    --variants default: noaside:SEMISEP_TRITON_EXACT_ASIDE=0 \
    --out /tmp/keep/v16 > /tmp/keep/v16.log 2>&1
grep -E "^N=| vs |Error" /tmp/keep/v16.log | cut -c1-134
tar czf $OUT/keep.tgz -C /tmp/keep .
grid() {  # grid NAME NS TS REPEAT IMPLS
  python3 benchmarks/gpu_ssd.py --skip-checks --Ns $2 --Ts $3 --impls $5 --repeat $4 \
      --host --out /tmp/keep/$1 > /tmp/keep/$1.log 2>&1
  grep -E "^N=" /tmp/keep/$1.log | cut -c1-134
  tar czf $OUT/keep.tgz -C /tmp/keep .
}
grid grid64d 64 1024,2048 3 fla
grid grid128b 128 2048,4096,16384 1 mamba,fla
bash benchmarks/probe/s35.sh
python3 benchmarks/probe/timeline.py default: noaside:SEMISEP_TRITON_EXACT_ASIDE=0 \
    > /tmp/keep/timeline.log 2>&1
grep span /tmp/keep/timeline.log | cut -c1-120
tar czf $OUT/keep.tgz -C /tmp/keep .
