#!/bin/bash
# s31-s32: two forward knobs, both off by default, on the device in one call: programmatic
# dependent launches (SEMISEP_TRITON_PDL) and G masked after u's store (SEMISEP_TRITON_LATE_G,
# gluon_fwd.late_g). The card; the Gluon checks with both on; the N = 64 cells with each
# knob and both against neither in one process (fla beside them); N = 128 16K likewise; the
# 16K forward's kernels; then the n = 128 one-launch check and the N = 128 1K whole-state
# one-span backward (pending since s30).
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/ab_fwd.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V=("base:" "pdl:SEMISEP_TRITON_PDL=1" "lateg:SEMISEP_TRITON_LATE_G=1"
   "both:SEMISEP_TRITON_PDL=1;SEMISEP_TRITON_LATE_G=1")
SEMISEP_TRITON_PDL=1 SEMISEP_TRITON_LATE_G=1 timeout 100 python3 benchmarks/gpu_ssd.py \
    --gluon-checks --skip-bench --out /tmp/keep/gluon > /tmp/keep/gluon.log 2>&1
grep -E "BAD|crash|Traceback" /tmp/keep/gluon.log | head -10; echo "ok lines: $(grep -c ' ok ' /tmp/keep/gluon.log)"
timeout 170 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64 --Ts 4096,16384 --impls fla \
    --repeat 3 --variants "${V[@]}" --out /tmp/keep/ab > /tmp/keep/ab.log 2>&1
grep -E "^N=| vs " /tmp/keep/ab.log | cut -c1-110
timeout 50 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --Ts 16384 --repeat 2 \
    --variants "${V[0]}" "${V[2]}" --out /tmp/keep/ab128 > /tmp/keep/ab128.log 2>&1
grep -E "^N=| vs " /tmp/keep/ab128.log | cut -c1-110
timeout 50 python3 benchmarks/gpu_profile.py --Ts 16384 --variants "${V[@]}" \
    > /tmp/keep/prof.log 2>&1; grep -A4 " fwd: " /tmp/keep/prof.log
timeout 40 python3 benchmarks/probe/check_small128.py > /tmp/keep/check_small128.log 2>&1
tail -14 /tmp/keep/check_small128.log
timeout 70 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --Ts 1024 --impls fla --repeat 3 \
    --host --variants "default:" "nb0s:SEMISEP_TRITON_BWD=NB=0,SPAN=32" --out /tmp/keep/nb0s \
    > /tmp/keep/nb0s.log 2>&1
grep -E "^N=| vs " /tmp/keep/nb0s.log | cut -c1-134
