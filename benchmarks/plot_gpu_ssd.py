"""Plot benchmarks/results/h200_ssd.json (written by gpu_ssd.py) as a PNG.

python benchmarks/plot_gpu_ssd.py [results.json] [out.png]
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results", "h200_ssd.json")
dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "results", "h200_ssd.png")
res = json.load(open(src))
rows = res["rows"]
impls = list(dict.fromkeys(r["impl"] for r in rows))
Ns = sorted({r["N"] for r in rows})
colors = {impl: f"C{k % 10}" for k, impl in enumerate(impls)}
fig, axes = plt.subplots(2, len(Ns), figsize=(6 * len(Ns), 9), squeeze=False)
for j, n in enumerate(Ns):
    for i, key in enumerate(["fwd_ms", "fwdbwd_ms"]):
        ax = axes[i][j]
        for impl in impls:
            pts = sorted((r["T"], r[key]) for r in rows
                         if r["impl"] == impl and r["N"] == n and r.get(key))
            if pts:
                ax.plot(*zip(*pts), marker="o", label=impl, color=colors[impl])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("T")
        ax.set_ylabel("ms (median)")
        ax.set_title(f"{'forward' if key == 'fwd_ms' else 'forward + backward'}, N={n}")
        ax.grid(True, which="both", alpha=0.3)
axes[0][0].legend(fontsize=7)
axes[1][0].legend(fontsize=7)
runs = "; ".join(f"{k}: {v}" for k, v in res.get("runs", {}).items())
fig.suptitle(f"SSD on {res.get('device')} (b=8, h=32, p=64, g=1, bf16)\n{res.get('date')}, "
             f"torch {res.get('torch')}, triton {res.get('triton')}" + (f"\n{runs}" if runs else ""),
             fontsize=8)
fig.tight_layout()
fig.savefig(dst, dpi=110)
print("wrote", dst)
