"""Which bf16 rounding in the backward's sweeps makes dA's error: a float64 emulation (CPU).

    python benchmarks/probe/da_rounding.py [--seeds 4,5,6,7] [--T 4096] [--n 128]

dA = sum over (b, t) of dt * dla, whose terms cancel (``grad_error.py``: 84- to 1390-fold on
the Gluon checks' n128 draw, where ours erred 1.25e-2 and mamba_ssm 3.9e-3, H200 s25-1). The
factored sweeps (``semisep/backends/triton/gluon_bwd.py``, their float64 twins in
``tests/triton/test_gluon_bwd.py``), for a (b, h) whose every chunk decays by more than
2^-64, make dla from

    w = exp(l) (dy S, C) + rowsum(P) - colsum(P),  P = strict(C B^T o dy u^T) exp(l)_rows
    dla = suffix(w) + prefix_excl(r2) + exp(l_end) <dS, S_in>,  r2 = (x, B dsx^T) dt exp(-l)

per block of 64 state columns, with u = x dt exp(-l), dsx = exp(l_end) dS and
dS <- exp(l_end) dS + dy^T (exp(l) C); the Triton kernels' exact loop (the other (b, h); on
these draws most of them) takes P = strict(C B^T o L o dy (x dt)^T) with L_ij = exp(l_i - l_j),
r2 = (x dt, (B dS^T) exp(l_end - l)) and the state's step from x dt exp(l_end - l). This
script runs those formulas in float64 and rounds to bf16 only the operands named (each where
the kernels round it): ``dy`` the cotangent (y's dtype: every implementation has it), ``u``,
``S`` (the state as a dot's operand), ``Sst`` (the stored state in the crossing term), ``cv``
(exp(l) C), ``dsx`` (the adjoint as an operand), ``xs`` (x dt as the exact loop's operand),
``xd`` (x dt exp(l_end - l), the exact state step's). Per draw (the probe's inputs of
``grad_error.py``: b=2, h=8, p=64, g=2, softplus(dt + dt_bias), head 3 at A = -1e4) and
rounding set: dA's norm-wise error and each head's against the emulation without rounding,
which equals float64 autograd of the reference (asserted per draw, to 1e-9; head 3 left out:
every chunk of it clamped).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from grad_error import draw  # noqa: E402

from semisep.backends.triton import naive  # noqa: E402

# the operands each form rounds to bf16 (module docstring). "kernels": the sweeps' own, where
# the exact loop's products with x dt take x itself (M = dy x^T scaled by dt in fp32, r2 from
# x) and the state's step rounds x dt exp(l_end - l) once; "x dt": as they were until s25,
# bf16(x dt) the operand of those products and of the state's step (written as "kernels" and
# "fix" in results/cpu_s25_da_rounding.log: "fix" is today's "kernels")
NAMES = ("dy", "u", "S", "Sst", "cv", "dsx", "xs", "xd")
SETS = {"dy": ("dy",), "dy+u": ("dy", "u"), "dy+xs": ("dy", "xs"), "dy+xd": ("dy", "xd"),
        "dy+S": ("dy", "S"), "dy+Sst": ("dy", "Sst"), "dy+cv": ("dy", "cv"),
        "dy+dsx": ("dy", "dsx"), "x dt": ("dy", "u", "S", "Sst", "cv", "dsx", "xs", "xd"),
        "kernels": ("dy", "u", "S", "Sst", "cv", "dsx", "xd")}


def bf(t):
    return t.to(torch.bfloat16).double()


def emulated_dA(x, dte, A, B, C, gy, rounds, Q=64):
    """dA by the sweeps' formulas (module docstring), float64 but for the ``rounds``: the
    factored loop's where every chunk of a (b, h) decays by more than 2^-64, else the exact
    loop's (per-entry decays L_ij = exp(l_i - l_j), x dt as the products' operand)."""
    r = {k: (bf if k in rounds else (lambda t: t)) for k in NAMES}
    b, T, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    dy = r["dy"](gy)
    dA = torch.zeros(h, dtype=torch.float64)
    for i in range(b):
        for j in range(h):
            k = j // (h // g)
            la = (dte[i, :, j] * A[j]).clamp_min(-128.0).view(-1, Q)
            lcum = la.cumsum(1)
            e_in, e_tot = lcum.exp(), lcum[:, -1].exp()
            factored = bool(e_tot.min() > 2.0 ** -64)
            inv = (-lcum).exp() if factored else None
            to_end = (lcum[:, -1:] - lcum).exp()
            L = torch.tril((lcum[:, :, None] - lcum[:, None, :]).clamp_max(0.0).exp())
            dt = dte[i, :, j].view(-1, Q)
            nc = T // Q
            for c0 in range(0, n, 64):
                Bk, Ck = B[i, :, k, c0:c0 + 64], C[i, :, k, c0:c0 + 64]
                S = torch.zeros(p, 64, dtype=torch.float64)
                states, w = [], []
                for c in range(nc):
                    t = slice(c * Q, (c + 1) * Q)
                    X, DY, Bc, Cc = x[i, t, j], dy[i, t, j], Bk[t], Ck[t]
                    states.append(r["Sst"](S))
                    if factored:
                        u = r["u"](X * (dt[c] * inv[c])[:, None])
                        Pm = torch.tril((Cc @ Bc.T) * (DY @ u.T), -1) * e_in[c][:, None]
                    else:
                        xs = r["xs"](X * dt[c][:, None])
                        Pm = torch.tril((Cc @ Bc.T) * L[c] * (DY @ xs.T), -1)
                    dyS = DY @ r["S"](S)
                    w.append(e_in[c] * (dyS * Cc).sum(1) + Pm.sum(1) - Pm.sum(0))
                    if factored:
                        S = e_tot[c] * (S + u.T @ Bc)
                    else:
                        S = e_tot[c] * S + r["xd"](xs * to_end[c][:, None]).T @ Bc
                dS = torch.zeros(p, 64, dtype=torch.float64)
                for c in reversed(range(nc)):
                    t = slice(c * Q, (c + 1) * Q)
                    X, DY, Bc, Cc = x[i, t, j], dy[i, t, j], Bk[t], Ck[t]
                    cross = e_tot[c] * (dS * states[c]).sum()
                    if factored:
                        dS = e_tot[c] * dS
                        st = Bc @ r["dsx"](dS).T
                        r2 = (X * st).sum(1) * (dt[c] * inv[c])
                    else:
                        st = (Bc @ r["dsx"](dS).T) * to_end[c][:, None]
                        r2 = (r["xs"](X * dt[c][:, None]) * st).sum(1)
                        dS = e_tot[c] * dS
                    suf = w[c].flip(0).cumsum(0).flip(0) + (r2.cumsum(0) - r2)
                    dA[j] += ((suf + cross) * dt[c]).sum()
                    dS = dS + DY.T @ r["cv"](Cc * e_in[c][:, None])
    return dA


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="4,5,6,7")
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--n", type=int, default=128)
    args = ap.parse_args()
    b, h, p, g = 2, 8, 64, 2
    for seed in map(int, args.seeds.split(",")):
        (x, dt, A, B, C, D, dtb), gy = draw(seed, b, args.T, h, p, g, args.n, torch.bfloat16,
                                            "cpu")
        x, dt, A, B, C, D, dtb, gy = [t.double() for t in (x, dt, A, B, C, D, dtb, gy)]
        dte = torch.nn.functional.softplus(dt + dtb)
        ref = emulated_dA(x, dte, A, B, C, gy, ())
        Ar = A.clone().requires_grad_(True)
        y = naive.ssd_reference_chunked(x, None, B, C, dt=dt, A=Ar, D=D, dt_bias=dtb,
                                        dt_softplus=True)[0]
        (whole,) = torch.autograd.grad((y * gy).sum(), [Ar])
        fact = A > -1e3          # head 3's every chunk clamped: dA 0 exactly
        assert ((ref - whole)[fact].abs() <= 1e-9 * whole[fact].abs()).all(), (ref, whole)
        print(f"seed {seed} n {args.n} T {args.T}: dA " + " ".join(f"{v:.3g}" for v in ref))
        for name, rounds in SETS.items():
            got = emulated_dA(x, dte, A, B, C, gy, rounds)
            err = (got - ref)[fact].norm() / ref[fact].norm()
            per = ((got - ref).abs() / ref.abs().clamp_min(1e-300))
            print(f"  {name:7s} dA {err:.2e}  per head "
                  + " ".join(f"{v:.1e}" if f else "   -   " for v, f in zip(per, fact)))


if __name__ == "__main__":
    main()
