#!/bin/bash
# s31: the forward's programmatic dependent launches (SEMISEP_TRITON_PDL, off by default) on
# the device, one call: the card, the Gluon checks with PDL on, the n = 128 one-launch check,
# then the N = 64 cells with PDL on and off in the same process (fla beside them), the
# N = 128 1K cell's whole-state one-span backward, the 16K forward's kernels with and without.
# Run: bash benchmarks/device_run.sh "bash benchmarks/probe/ab_pdl.sh" (carry [".whl"]).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
SEMISEP_TRITON_PDL=1 timeout 200 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon > /tmp/keep/gluon.log 2>&1
grep -E "BAD|crash|Traceback" /tmp/keep/gluon.log | head -10; echo "ok lines: $(grep -c ' ok ' /tmp/keep/gluon.log)"
timeout 120 python3 benchmarks/probe/check_small128.py > /tmp/keep/check_small128.log 2>&1; tail -14 /tmp/keep/check_small128.log
timeout 240 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64 --Ts ${PDL_TS:-1024,4096,16384} --impls fla --repeat 3 --variants "pdl:SEMISEP_TRITON_PDL=1" "nopdl:" --out /tmp/keep/ab > /tmp/keep/ab.log 2>&1
grep -E "^N=| vs " /tmp/keep/ab.log | cut -c1-110
timeout 150 python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --Ts 1024 --impls fla --repeat 3 --host --variants "default:" "nb0s:SEMISEP_TRITON_BWD=NB=0,SPAN=32" --out /tmp/keep/nb0s > /tmp/keep/nb0s.log 2>&1
grep -E "^N=| vs " /tmp/keep/nb0s.log | cut -c1-134
timeout 100 python3 benchmarks/gpu_profile.py --Ts 16384 --variants "pdl:SEMISEP_TRITON_PDL=1" "nopdl:" > /tmp/keep/prof.log 2>&1; grep -B1 -A4 " fwd: " /tmp/keep/prof.log
