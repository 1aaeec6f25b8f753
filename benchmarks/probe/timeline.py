"""The forward's kernels on the device's clock (s38): start and end of each kernel of a few
calls, each after the L2 flush do_bench makes, for the default and the variants named on the
command line (name:ENV=VAL;...). Prints each call's span from the flush's end to the end of
its last kernel to finish, and each kernel's start after the latest end before it (the gaps;
negative for a kernel that overlaps one before it, on a side stream). s38-4's log predates
the span's fix: it took the last kernel to start, so its aside spans read ~110 us."""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gpu_ssd import env_set, make_inputs  # noqa: E402

from semisep.backends.triton import ssd  # noqa: E402

T = int(os.environ.get("T", 16384))
x, dt, A, B, C, D = make_inputs(8, T, 32, 64, 1, 64, torch.bfloat16, seed=T + 64)
flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
for arg in sys.argv[1:] or ["default:"]:
    name, _, spec = arg.partition(":")
    env = dict(kv.split("=", 1) for kv in spec.split(";") if kv)
    with env_set(env):
        fn = lambda: ssd(x, None, B, C, dt=dt, A=A, D=D)  # noqa: E731
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(6):
                flush.zero_()
                fn()
            torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type.name == "CUDA"),
                 key=lambda e: e.time_range.start)
    calls, cur = [], None
    for e in evs:
        if "elementwise" in e.name or "Fill" in e.name:
            cur = [e]
            calls.append(cur)
        elif cur is not None:
            cur.append(e)
    for c in calls[1:]:
        fl, ks = c[0], c[1:]
        span = max(k.time_range.end for k in ks) - fl.time_range.end
        parts = []
        prev = fl.time_range.end
        for k in ks:
            parts.append(f"+{k.time_range.start - prev:5.1f} {k.name[:14]} "
                         f"{k.time_range.end - k.time_range.start:6.1f}")
            prev = max(prev, k.time_range.end)
        print(f"{name:8s} span {span:6.1f} us | " + " | ".join(parts))
