#!/bin/bash
# A/B of the working tree against _base (see ab_trees.sh for making it) at the host-bound
# N = 128 1K cell: gpu_ssd.py with fla, three timings a process, base and new in turn twice,
# then gpu_profile.py's device and host time of each (s30-2).
for i in 1 2; do
  for tree in base new; do
    if [ $tree = base ]; then s=_base/benchmarks/gpu_ssd.py; else s=benchmarks/gpu_ssd.py; fi
    timeout 120 python3 $s --skip-checks --Ns 128 --Ts 1024 --impls fla --repeat 3 --host --out /tmp/keep/s_${tree}$i > /tmp/keep/s_${tree}$i.log 2>&1
    echo "-- $tree $i"; grep -E "^N=" /tmp/keep/s_${tree}$i.log | grep -v "fla_chunk_simple" | cut -c1-150
  done
done
for tree in new base; do
  if [ $tree = base ]; then s=_base/benchmarks/gpu_profile.py; else s=benchmarks/gpu_profile.py; fi
  echo "-- profile $tree"; timeout 90 python3 $s --n 128 --Ts 1024 > /tmp/keep/p_$tree.log 2>&1; grep -E "^T=" /tmp/keep/p_$tree.log
done
