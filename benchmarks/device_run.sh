#!/bin/bash
# One device call: bash benchmarks/device_run.sh STEP... (steps below: ncu, sanitize, checks,
# late, grid64, grid128, small128, or a quoted command; benchmarks/NOTES.md).
# Everything goes into one tar, $OUT/keep.tgz (the device returns at most 8 files).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p /tmp/keep
# a tar every 30 s as well: a call cut at its limit keeps what the step had written
(while sleep 30; do tar czf $OUT/keep.part.tgz -C /tmp/keep . 2>/dev/null; done) &
saver=$!
for step in "$@"; do
  echo "=== $step $(date +%T)"
  case $step in
    ncu)  # counters, stall reasons and per-SASS-line samples of the three sweeps (T = 4K;
          # NCU_KERNELS="name ..." picks some)
      for k in ${NCU_KERNELS:-ssd_fwd_kernel ssd_bwd_fwdsweep_kernel ssd_bwd_revsweep_kernel}; do
        ncu --clock-control none --set full --import-source yes -k regex:$k -c 1 \
            -o /tmp/keep/$k python3 benchmarks/gpu_small.py ncu > /tmp/keep/ncu_$k.log 2>&1
        tail -1 /tmp/keep/ncu_$k.log
        for page in details raw; do
          ncu -i /tmp/keep/$k.ncu-rep --page $page --csv > /tmp/keep/${page}_$k.csv 2>&1
        done
        ncu -i /tmp/keep/$k.ncu-rep --page source --csv --print-source sass \
            > /tmp/keep/source_$k.csv 2>&1
        rm -f /tmp/keep/$k.ncu-rep
      done ;;
    sanitize)  # memcheck without torch's caching allocator (else pool memory hides reads)
      for T in 300 512; do
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck \
            python3 benchmarks/gpu_small.py sanitize $T > /tmp/keep/sanitize_$T.log 2>&1
        grep -E "ERROR SUMMARY|finished|Error" /tmp/keep/sanitize_$T.log | head -5
      done ;;
    checks) python3 benchmarks/gpu_ssd.py --quick-checks --skip-bench --out /tmp/keep/checks ;;
    late)  # 2^31+, torch.compile, decode, cached launch; every cached launch checks its arg_key
      SEMISEP_TRITON_CHECK_ARG_KEY=1 python3 benchmarks/gpu_ssd.py --late-checks --skip-bench \
          --out /tmp/keep/late ;;
    grid64)  # the N = 64 grid with the anchors, each cell twice with the impls in turn
      python3 benchmarks/gpu_ssd.py --skip-checks --Ns 64 --impls mamba,fla --repeat 2 --host \
          --out /tmp/keep/grid64 > /tmp/keep/grid64.log 2>&1
      grep -E "^N=" /tmp/keep/grid64.log | cut -c1-134 ;;
    grid128)  # the N = 128 grid with the anchors
      python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --impls mamba,fla \
          --out /tmp/keep/grid128 > /tmp/keep/grid128.log 2>&1
      grep -E "^N=" /tmp/keep/grid128.log | cut -c1-104 ;;
    small128)  # the host-bound N = 128 cells: plans by knob, fla in the same run, 3 timings
      python3 benchmarks/gpu_ssd.py --skip-checks --Ns 128 --Ts 1024,2048,4096 --impls fla \
          --repeat 3 --host --variants "default:" "q64:SEMISEP_TRITON_FWD=Q=64;SEMISEP_TRITON_GRAM=0" \
          "nb0:SEMISEP_TRITON_BWD=NB=0" --out /tmp/keep/small128 > /tmp/keep/small128.log 2>&1
      grep -E "^N=| vs " /tmp/keep/small128.log | cut -c1-134 ;;
    *) eval "$step" ;;
  esac
  tar czf $OUT/keep.tgz -C /tmp/keep .   # after every step: a call cut at its limit keeps the rest
done
kill $saver; rm -f $OUT/keep.part.tgz
ls -la $OUT
echo "=== end $(date +%T)"
