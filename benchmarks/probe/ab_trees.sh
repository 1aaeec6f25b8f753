#!/bin/bash
# A/B of the working tree against another commit's, on the device, in turn (two processes a
# tree): `--gluon-checks` of the working tree, then gpu_ssd.py's N = 64 / 128 cells at 4K and
# 16K (semisep only) base, new, base, new, then gpu_profile.py's kernels at 16K for both.
# Make the base tree here first (ignored: the call carries it, with the wheels):
#     mkdir _base && git archive REV semisep benchmarks/gpu_ssd.py benchmarks/gpu_profile.py \
#         | tar -x -C _base
# then run `bash benchmarks/device_run.sh "bash benchmarks/probe/ab_trees.sh"` with carry
# [".whl", "_base"] (s29-1).
timeout 240 python3 benchmarks/gpu_ssd.py --gluon-checks --skip-bench --out /tmp/keep/gluon > /tmp/keep/gluon.log 2>&1
grep -E "BAD|crash|Traceback" /tmp/keep/gluon.log | head -20; echo "ok lines: $(grep -c ' ok ' /tmp/keep/gluon.log)"
grep -E "y vs triton|final vs triton|launched" /tmp/keep/gluon.log | head -20
# AB_ROUNDS, AB_NS, AB_TS (defaults 2, 64,128, 4096,16384) trim it to the call's limit.
for i in $(seq ${AB_ROUNDS:-2}); do
  for tree in base new; do
    if [ $tree = base ]; then s=_base/benchmarks/gpu_ssd.py; else s=benchmarks/gpu_ssd.py; fi
    timeout 150 python3 $s --skip-checks --Ns ${AB_NS:-64,128} --Ts ${AB_TS:-4096,16384} --impls "" --out /tmp/keep/ab_${tree}$i > /tmp/keep/ab_${tree}$i.log 2>&1
    echo "-- $tree $i"; grep -E "^N=" /tmp/keep/ab_${tree}$i.log | cut -c1-120
  done
done
for tree in new base; do
  if [ $tree = base ]; then s=_base/benchmarks/gpu_profile.py; else s=benchmarks/gpu_profile.py; fi
  echo "-- profile $tree"; timeout 120 python3 $s --Ts 16384 > /tmp/keep/prof_$tree.log 2>&1; tail -25 /tmp/keep/prof_$tree.log
done
