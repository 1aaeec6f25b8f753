"""Compile the Gluon kernels for sm_90 here, without a GPU, and print what ptxas made of them.

    PYTHONPATH=. /tmp/t36/bin/python benchmarks/probe/aot_gluon.py [fwd] [fwd128] [fwdsweep] [revsweep] [revsweep_acc]

(a Triton 3.6 venv: the device's version). Per kernel: registers, stack, shared memory, the
number of wgmma (HGMMA) and of waits that leave products in flight (``DEPBAR.LE gsb0, 0x1+``)
or none (``0x0``), and ptxas' C7514 warning (it serializes every wgmma of the kernel).
With ``AOT_GLUON_SASS=DIR`` each kernel's SASS is written to ``DIR/NAME.sass`` as well.
The forward's constexprs from the environment: ``W_ROWS`` (default 1), ``PDL`` (1).
"""
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
LAY = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
DESC = f"tensordesc<bf16[64, 64],{LAY!r}>"


def _sig(descs, ptrs, ints, consts):
    sig = {k: DESC for k in descs}
    sig.update({k: "*fp32" for k in ptrs})
    sig.update({k: "i32" for k in ints})
    sig.update({k: "constexpr" for k in consts})
    return sig


def kernels():
    from semisep.backends.triton import gluon_bwd, gluon_fwd
    # W_ROWS=0: the forward reading all the pre-pass's rows (a forward autograd records)
    sweep = dict(Q=64, P=64, N=64, STAGES=2, HAS_D=True,
                 W_ROWS=os.environ.get("W_ROWS", "1") == "1")
    bwd = dict(Q=64, P=64, N=64, NT=int(os.environ.get('NT', 64)), STAGES=2, HAS_D=True)
    fmin = dict(FACTOR_MIN=2.0 ** -64)
    pdl = dict(PDL=os.environ.get("PDL", "1") == "1")
    return {
        "fwd": (gluon_fwd.ssd_fwd_gluon_kernel,
                _sig(("x_desc", "b_desc", "c_desc", "y_desc"),
                     ("dec_ptr", "etot_ptr", "D_ptr", "hT_ptr"), ("T", "H", "G", "NC", "PT"),
                     dict(sweep, **fmin, **pdl)),
                dict(sweep, STAGES=gluon_fwd.STAGES[64], **fmin, **pdl)),
        "fwd128": (gluon_fwd.ssd_fwd_gluon_kernel,
                   _sig(("x_desc", "b_desc", "c_desc", "y_desc"),
                        ("dec_ptr", "etot_ptr", "D_ptr", "hT_ptr"), ("T", "H", "G", "NC", "PT"),
                        dict(sweep, N=128, **fmin, **pdl)),
                   dict(sweep, N=128, STAGES=gluon_fwd.STAGES[128], **fmin, **pdl)),
        "fwdsweep": (gluon_bwd.ssd_bwd_fwdsweep_gluon_kernel,
                     _sig(("x_desc", "dy_desc", "b_desc", "c_desc", "st_desc"),
                          ("dec_ptr", "etot_ptr", "dC_ptr", "w_ptr", "dD_ptr"),
                          ("T", "H", "G", "NC", "C0"), dict(bwd, **fmin)),
                     dict(bwd, **fmin)),
        **{name: (gluon_bwd.ssd_bwd_revsweep_gluon_kernel,
                  _sig(("x_desc", "dy_desc", "b_desc", "c_desc", "st_desc", "dx_desc"),
                       ("dec_ptr", "etot_ptr", "w_ptr", "A_ptr", "D_ptr", "dB_ptr",
                        "ddt_ptr", "dsum_ptr"), ("T", "H", "G", "NC", "C0"),
                       dict(bwd, ACC_DX=acc, **fmin)), dict(bwd, ACC_DX=acc, **fmin))
           for name, acc in (("revsweep", False), ("revsweep_acc", True))},
    }


def report(name, fn, sig, consts):
    k = triton.compile(GluonASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=4))
    with tempfile.TemporaryDirectory() as d:
        cubin, ptx = os.path.join(d, "k.cubin"), os.path.join(d, "k.ptx")
        open(cubin, "wb").write(k.asm["cubin"])
        open(ptx, "w").write(k.asm["ptx"])
        use = subprocess.run([f"{BIN}/cuobjdump", "--dump-resource-usage", cubin],
                             capture_output=True, text=True).stdout
        sass = subprocess.run([f"{BIN}/cuobjdump", "-sass", cubin], capture_output=True,
                              text=True).stdout
        warn = subprocess.run([f"{BIN}/ptxas", "-arch=sm_90a", "-v", ptx, "-o",
                               os.path.join(d, "o.cubin")], capture_output=True, text=True)
    if os.environ.get("AOT_GLUON_SASS"):
        with open(os.path.join(os.environ["AOT_GLUON_SASS"], f"{name}.sass"), "w") as f:
            f.write(sass)
    regs = re.search(r"REG:(\d+)", use).group(1)
    stack = re.search(r"STACK:(\d+)", use).group(1)
    instructions = len(re.findall(r"/\*[0-9a-f]{4}\*/", sass))
    print(f"{name}: {regs} registers, {stack} B stack, {k.metadata.shared} B shared, "
          f"{instructions} SASS instructions, "
          f"{sass.count('HGMMA')} HGMMA, waits in flight "
          f"{len(re.findall(r'DEPBAR.LE gsb0, 0x[1-9]', sass))}, full "
          f"{sass.count('DEPBAR.LE gsb0, 0x0')}, C7514: {'C7514' in warn.stderr}")


if __name__ == "__main__":
    ks = kernels()
    for name in sys.argv[1:] or ks:
        report(name, *ks[name])
