"""Warp-stall samples of a kernel from Nsight Compute's source page (as device_run.sh writes it).

    python benchmarks/ncu_stalls.py DIR KERNEL [KERNEL ...] [--top 15]

Reads ``DIR/source_KERNEL.csv`` (``ncu -i REP --page source --csv --print-source sass``) and
prints the share of each stall reason over all samples and the SASS lines with most samples.
"""
import argparse
import collections
import csv
import os


def summary(path, top):
    rows = list(csv.reader(open(path)))
    hdr, data = rows[1], rows[2:]           # row 0 names the kernel
    i_src = hdr.index("Source")
    i_all = hdr.index("Warp Stall Sampling (All Samples)")
    reasons = [(j, h[len("stall_"):]) for j, h in enumerate(hdr)
               if h.startswith("stall_") and "Not Issued" not in h]
    by_reason = collections.Counter()
    lines = []
    for r in data:
        if not r[i_all].strip().isdigit():
            continue
        lines.append((int(r[i_all]), r[i_src].strip()))
        for j, name in reasons:
            if r[j].strip().isdigit():
                by_reason[name] += int(r[j])
    total = sum(by_reason.values()) or 1
    out = [f"   {', '.join(f'{k} {v / total * 100:.1f}%' for k, v in by_reason.most_common(10))}"]
    out += [f"   {n:7d}  {src}" for n, src in sorted(lines, reverse=True)[:top]]
    return total, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    for k in args.kernels:
        total, out = summary(os.path.join(args.dir, f"source_{k}.csv"), args.top)
        print(f"== {k}: {total} samples")
        print("\n".join(out))


if __name__ == "__main__":
    main()
