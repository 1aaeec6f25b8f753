"""How far each gradient of a bf16 SSD call lies from float64, for semisep and mamba_ssm on
the same inputs: is a gradient's error the kernel's or the problem's?

    python benchmarks/probe/grad_error.py [--n 128] [--T 4096] [--seeds 4,5,6,7] [--case TAG]
                                          [--device cpu] [--backend torch] [--impls LIST]

The inputs of ``gpu_ssd.py --gluon-checks`` (b=2, h=8, p=64, g=2, head 3 with A = -1e4,
dt_bias with softplus, D per head), each seed its own draw; with ``--case`` (a tag of
``gpu_ssd.GLUON_CASES``, e.g. ``n128`` or ``"n128 z"``, or several: ``p64,n128``) that
check's own values (z too). Per
draw and gradient: the norm-wise relative error (as the checks compute it) of semisep in bf16
(16b), of semisep in bf16 with fp32 inter-chunk states (16b-fs32, ``fp32_states=True``), of
semisep in fp32 on the same (bf16-representable) values, of semisep in fp32 given the
cotangent rounded to bf16 (fp32-dy16: the error that the rounding of dy, which every bf16
implementation receives, makes alone), and of ``mamba_chunk_scan_combined`` in bf16
(``--impls``: a comma-separated subset of ``16b,16b-fs32,fp32,fp32-dy16,mamba``), against float64 gradients taken from float64 leaves
(and, on the line ``vs dy16``, against those given the cotangent rounded to bf16, as the
implementations receive it: their own error; ``floor``: that rounding alone);
for dA also each head's error and ``sum |dt dla| / |dA|``, how much the sum that makes dA
cancels (dla from float64 autograd of the reference on the log-decays). ``--backend torch``
runs semisep's torch backend instead (in bf16 on the CPU too: another bf16 implementation);
``--device cpu`` with the Triton backend runs the interpreter in float16 (no bf16 dots there;
set ``TRITON_INTERPRET=1`` and ``SEMISEP_TRITON_CPU=1``).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from gpu_ssd import gluon_case_inputs, load_mamba, make_inputs, rel  # noqa: E402

import semisep  # noqa: E402
from semisep.backends.triton import naive  # noqa: E402

NAMES = ["dx", "ddt", "dA", "dB", "dC", "dD", "ddt_bias", "dz"]


def draw(seed, b, T, h, p, g, n, dtype, device):
    x, dt, A, B, C, D = make_inputs(b, T, h, p, g, n, dtype, seed=seed, device=device)
    A[3] = -1e4
    gen = torch.Generator(device=device).manual_seed(seed + 1000)
    dtb = torch.randn(h, device=device, generator=gen) * 0.5
    gy = torch.randn(b, T, h, p, device=device, generator=gen)
    return [x, dt, A, B, C, D, dtb], gy


def checks_draws(tags):
    """``(tag, inputs, cotangent)`` of the Gluon checks ``tags``, drawn as the checks draw
    them."""
    torch.manual_seed(0)
    found = {case[0]: ([t.detach() for t in ins], gy)
             for case, ins, _, gy in gluon_case_inputs()}
    bad = [t for t in tags if t not in found]
    if bad:
        raise ValueError(f"--case: got {bad!r}, wanted tags of gpu_ssd.GLUON_CASES: "
                         f"{sorted(found)}")
    return [(t, *found[t]) for t in tags]


def grads(fn, ins, gy):
    ins = [t.detach().clone().requires_grad_(True) for t in ins]
    y = fn(*ins)
    return torch.autograd.grad((y.double() * gy.double()).sum(), ins)


def ours(backend, fp32_states=False):
    def run(x, dt, A, B, C, D, dtb, z=None):
        return semisep.ssd(x, None, B, C, dt=dt, A=A, D=D, dt_bias=dtb, dt_softplus=True, z=z,
                           backend=backend, fp32_states=fp32_states)
    return run


def reference(x, dt, A, B, C, D, dtb, z=None):
    return naive.ssd_reference_chunked(x, None, B, C, dt=dt, A=A, D=D, dt_bias=dtb,
                                       dt_softplus=True, z=z)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--seeds", default="4,5,6,7")
    ap.add_argument("--device", default="cuda", help="cpu: float16 under TRITON_INTERPRET=1")
    ap.add_argument("--case", help="a Gluon check's own inputs (CUDA), instead of --seeds")
    ap.add_argument("--backend", default="triton", choices=["triton", "torch"])
    ap.add_argument("--impls", default="16b,fp32,mamba")
    args = ap.parse_args()
    wanted = args.impls.split(",")
    known = {"16b", "16b-fs32", "fp32", "fp32-dy16", "mamba"}
    if not set(wanted) <= known:
        ap.error(f"--impls: got {args.impls!r}, wanted a subset of {','.join(sorted(known))}")
    interpreted = args.device == "cpu" and args.backend == "triton"
    dtype = torch.float16 if interpreted else torch.bfloat16
    semisep_ = ours(args.backend)
    mamba = load_mamba() if args.device == "cuda" and "mamba" in wanted else None
    b, h, p, g = 2, 8, 64, 2
    draws = (checks_draws(args.case.split(",")) if args.case else
             [(f"seed {s} n {args.n} T {args.T}",
               *draw(s, b, args.T, h, p, g, args.n, dtype, args.device))
              for s in map(int, args.seeds.split(","))])
    for title, ins, gy in draws:
        # from float64 leaves: a bf16 leaf's gradient would come back rounded to bf16
        ref = grads(reference, [t.double() for t in ins], gy)
        print(title)
        gy16 = gy.to(dtype).to(gy.dtype)
        ref16 = grads(reference, [t.double() for t in ins], gy16)
        print(f"  {'floor':16s} " + " ".join(f"{k} {rel(a, r):.2e}"
                                             for k, a, r in zip(NAMES, ref16, ref)))
        impls = {"semisep 16b": (semisep_, ins, gy),
                 "semisep 16b-fs32": (ours(args.backend, fp32_states=True), ins, gy),
                 "semisep fp32": (semisep_, [t.float() for t in ins], gy),
                 # fp32 throughout but the cotangent, rounded as a 16-bit y's gradient is
                 # (every 16-bit implementation's dy): the error that rounding alone makes
                 "semisep fp32-dy16": (semisep_, [t.float() for t in ins], gy16)}
        impls = {k: v for k, v in impls.items() if k.split()[1] in wanted}
        if mamba is not None:
            impls["mamba 16b"] = (lambda x, dt, A, B, C, D, dtb, z=None: mamba(
                x, dt, A, B, C, chunk_size=256, D=D, z=z, dt_bias=dtb, dt_softplus=True), ins,
                gy)
        for name, (fn, args_, gy_) in impls.items():     # each printed as it is done
            gs = grads(fn, args_, gy_)
            print(f"  {name:16s} " + " ".join(f"{k} {rel(a, r):.2e}"
                                                for k, a, r in zip(NAMES, gs, ref)))
            print(f"  {name:16s} vs dy16 " + " ".join(f"{k} {rel(a, r):.2e}"
                                                        for k, a, r in zip(NAMES, gs, ref16)))
            per = (gs[2].double() - ref[2]).abs() / ref[2].abs().clamp_min(1e-300)
            print(f"  {name:16s} dA per head " + " ".join(f"{v:.1e}" for v in per.tolist()))
        print("  dA ref " + " ".join(f"{v:.3g}" for v in ref[2].tolist()))
        # dA = sum over (b, t) of dt_eff * dla: the cancellation of that sum per head
        x, dt, A, B, C, D, dtb = [t.detach().double() for t in ins[:7]]
        dte = torch.nn.functional.softplus(dt + dtb)
        # dA = sum of dt * dla, dla the gradient of the log-decays dt * A (x dt held fixed)
        la = (dte * A).requires_grad_(True)
        z = ins[7].double() if len(ins) > 7 else None
        y = naive.ssd_reference_chunked(x * dte[..., None], la, B, C, D=D, z=z)[0]
        (dla,) = torch.autograd.grad((y * gy.double()).sum(), [la])
        terms = dte * dla
        cancel = terms.abs().sum((0, 1)) / terms.sum((0, 1)).abs().clamp_min(1e-300)
        print("  dA cancellation sum|dt dla|/|dA| " + " ".join(f"{v:.3g}"
                                                            for v in cancel.tolist()))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
