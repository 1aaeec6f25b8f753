"""On a GPU: the n = 128 forward+backward of a call small enough for one launch (since s30 its
forward runs the backward's chunks of 64 and hands it its decays), against float64.

    python3 benchmarks/probe/check_small128.py

T = 1000 (not a multiple of 64), b = 2, h = 4, g = 2, p = 64, dt / A / dt_bias / D, h0 and a
final-state gradient; fp32 (ieee dots; the blocks of 64 since s33), bf16 and fp16 (the whole
state in one span, ``config.whole_state``), or those named in ``CHECK_DTYPES`` (e.g.
``bf16,fp16``). Prints each output's and gradient's error relative to float64
(``naive.ssd_reference_chunked`` on the same device, given the 16-bit call's x, B, C and
y's cotangent as rounded to its dtype) and the kernels launched. Without a
GPU: fp32 only, under ``TRITON_INTERPRET=1`` (set it), T from ``CHECK_T``.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from semisep.backends.triton import launch as L  # noqa: E402
from semisep.backends.triton import naive, ssd  # noqa: E402


def rel(a, b):
    a, b = a.double(), b.double()
    return float("nan") if not torch.isfinite(a).all() else ((a - b).norm() / b.norm()).item()


def main():
    gen = torch.Generator().manual_seed(0)
    b, T, h, g, p, n = 2, int(os.environ.get("CHECK_T", 1000)), 4, 2, 64, 128
    device = "cuda" if torch.cuda.is_available() else "cpu"
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    ins = dict(x=r(b, T, h, p), B=r(b, T, g, n) / n ** 0.5, C=r(b, T, g, n),
               dt=torch.rand(b, T, h, generator=gen) * 0.5, A=-torch.rand(h, generator=gen) * 2,
               dt_bias=r(h) * 0.3, D=r(h), initial_state=r(b, h, p, n))
    gy, gs = r(b, T, h, p), r(b, h, p, n)
    wanted = ("x", "B", "C", "dt", "A", "dt_bias", "D", "initial_state")

    def run(fn, dtype, device, rounded=None):
        """fn's outputs and gradients in ``dtype`` (x, B, C; the rest fp32, or all float64);
        ``rounded``: x, B, C and the cotangent of y first rounded to that dtype, as ours
        receive them (the float64 reference of a 16-bit call, as gpu_ssd.py's checks)."""
        def cast(k, v):
            if rounded is not None and k in ("x", "B", "C"):
                v = v.to(rounded)
            return v.to(device=device, dtype=dtype if k in ("x", "B", "C") else
                        (torch.float64 if dtype == torch.float64 else torch.float32))
        t = {k: cast(k, v).requires_grad_(True) for k, v in ins.items()}
        y, hT = fn(t)
        gy_ = gy if rounded is None else gy.to(rounded)
        loss = (y.double() * gy_.to(device, torch.float64)).sum() + (
            hT.double() * gs.to(device, torch.float64)).sum()
        return [y, hT, *torch.autograd.grad(loss, [t[k] for k in wanted])]

    def ours(t):
        return ssd(t["x"], None, t["B"], t["C"], dt=t["dt"], A=t["A"], dt_bias=t["dt_bias"],
                   D=t["D"], dt_softplus=True, initial_state=t["initial_state"],
                   return_final_state=True)

    def reference(t):
        return naive.ssd_reference_chunked(t["x"], None, t["B"], t["C"], dt=t["dt"], A=t["A"],
                                           dt_bias=t["dt_bias"], D=t["D"], dt_softplus=True,
                                           initial_state=t["initial_state"])

    launched = []
    real = L.launch

    def spy(kernel, *args, **kwargs):
        launched.append(getattr(kernel, "__name__", str(kernel)))
        return real(kernel, *args, **kwargs)

    L.launch = spy
    checks = {"fp32": (torch.float32, 1e-5), "bf16": (torch.bfloat16, 5e-3),
              "fp16": (torch.float16, 5e-3)}
    picked = os.environ.get("CHECK_DTYPES", "fp32,bf16,fp16" if device == "cuda" else "fp32")
    for dtype, tol in (checks[k] for k in picked.split(",")):
        want = [w.cpu() for w in run(reference, torch.float64, device,
                                      None if dtype == torch.float32 else dtype)]
        launched.clear()
        got = run(ours, dtype, device)
        errs = {k: rel(a.cpu(), w) for k, a, w in zip(("y", "hT", *wanted), got, want)}
        bad = [k for k, e in errs.items() if not e <= tol]
        print(f"{dtype}: {'BAD ' + str(bad) if bad else 'ok'} (tol {tol:g}) "
              + " ".join(f"{k} {e:.1e}" for k, e in errs.items()))
        print(f"  launches: {launched}")


if __name__ == "__main__":
    main()
