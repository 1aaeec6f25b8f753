"""Compile the Triton SSD kernels for sm_90 without a GPU; print registers, spills, shared memory.

python benchmarks/aot_check.py [BP=64 BN=64 Q=64 num_warps=4 num_stages=2 dtype=bf16 maxnreg=N
                                 pre=0|1|2 factor=0|1 atomic=0|1 factored=0|1 sass=1 dump=FILE only=fwd+bwd1+...
                                 even=0|1 full=1 loops=N spans=1 HAS_Z=1 D_PER_P=1 ...]

``pre=2``: the forward reading the pre-pass's factored rows only (a forward without
autograd). ``spans=1`` compiles the forward in spans (its checkpoints, as for a backward in more than
one span; ``SPANNED=1`` the sweeps of such a backward). ``full=1`` turns every optional feature on (dt_bias, softplus, D per p, z, seq_idx, initial and
final state gradients) and adds the decode and pre-pass kernels; an upper-case key sets one flag;
``loops=N`` lists every loop of N or more instructions (a kernel with ``ONE_LAUNCH`` has two),
``mix=1`` with each one's spill (LDL, STL), shared-memory, async-copy and barrier counts.
Run it under the Triton of the device (3.6) to catch front-end errors before a device call.
Every run compiles afresh, in a temporary ``TRITON_CACHE_DIR`` unless one is set: an entry of
the shared cache can hold a kernel that no longer matches its source (2026-12-01: a one-launch
reverse sweep with one loop, compiled from work in progress, under the key of the final
source).
"""
import atexit
import os
import shutil
import sys
import tempfile

if "TRITON_CACHE_DIR" not in os.environ:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="aot_check_")
    atexit.register(shutil.rmtree, os.environ["TRITON_CACHE_DIR"], True)

import triton  # noqa: E402
import triton.language as tl  # noqa: F401,E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from semisep.backends.triton import decays  # noqa: E402
from semisep.backends.triton import kernels as K  # noqa: E402

opts = dict(BP=64, BN=64, Q=64, num_warps=4, num_stages=2, dtype="bf16")
for a in sys.argv[1:]:
    k, v = a.split("=")
    opts[k] = v if k in ("dtype", "only", "dump", "ttgir") else int(v)
dt = opts["dtype"]
target = GPUTarget("cuda", 90, 32)


def sig_of(fn, ptr_args, int_args):
    sig = {}
    for name in fn.arg_names:
        if name in ptr_args:
            sig[name] = ptr_args[name]
        elif name in int_args:
            sig[name] = "i32"
        else:
            sig[name] = "constexpr"
    return sig


common_flags = dict(FACTORED=bool(opts.get("factored", 1)), HAS_DT=True, DT_SOFTPLUS=False, HAS_DTB=False, HAS_D=True, D_PER_P=False,
                    HAS_Z=False, HAS_SEQ=False, Q=opts["Q"], BP=opts["BP"], BN=opts["BN"],
                    PREC="tf32", CLAMP_C=decays.CLAMP, PRE=int(opts.get("pre", 0)),
                    FACTOR=bool(opts.get("factor", 1)), FAST=True, ATOMIC=bool(opts.get("atomic", 0)),
                    EVEN=bool(opts.get("even", 1)), UNROLL=1, STATE_T=True)
FEATURES = dict(HAS_DTB=True, DT_SOFTPLUS=True, D_PER_P=True, HAS_Z=True, STORE_YU=True,
                FAST_GATE=True, HAS_SEQ=True,
                HAS_H0=True, HAS_DHT=True, STORE_DH0=True)
if opts.get("full"):
    common_flags.update(FEATURES)
INT_FLAGS = ("Q", "BP", "BN", "UNROLL")
common_flags.update({k: (v if k in INT_FLAGS else bool(v)) for k, v in opts.items()
                     if k.isupper() and k not in ("Q", "BP", "BN")})
P = f"*{dt}"
F = "*fp32"
kernels = {
    "fwd": (K.ssd_fwd_kernel,
            dict(x_ptr=P, dt_ptr=F, A_ptr=F, dtb_ptr=F, B_ptr=P, C_ptr=P, D_ptr=F, z_ptr=P,
                 h0_ptr=F, seq_ptr="*i32", dec_ptr=F, etot_ptr=F, gl_ptr=P, y_ptr=P, yu_ptr=P,
                 hT_ptr=F, ck_ptr=F),
            dict(HAS_H0=False, STORE_HT=True, SPANS=bool(opts.get("spans", 0)))),
    "bwd1": (K.ssd_bwd_fwdsweep_kernel,
             dict(x_ptr=P, dt_ptr=F, A_ptr=F, dtb_ptr=F, B_ptr=P, C_ptr=P, D_ptr=F,
                  h0_ptr=F, ck_ptr=F, seq_ptr="*i32", dy_ptr=P, dec_ptr=F, etot_ptr=F,
                  dC_ptr=F, w_ptr=F, dD_ptr=F, st_ptr=P),
             dict(HAS_H0=False)),
    "bwd2": (K.ssd_bwd_revsweep_kernel,
             dict(x_ptr=P, dt_ptr=F, A_ptr=F, dtb_ptr=F, B_ptr=P, C_ptr=P, D_ptr=F,
                  seq_ptr="*i32", dy_ptr=P, dhT_ptr=F, carry_ptr=F, dec_ptr=F, etot_ptr=F,
                  st_ptr=P, w_ptr=F, dx_ptr=P, dB_ptr=F, ddt_ptr=F, dsum_ptr=F, dh0_ptr=F),
             dict(HAS_DHT=False, STORE_DH0=False)),
}
if opts.get("full"):
    kernels["decays"] = (decays.ssd_decays_kernel,
                         dict(dt_ptr=F, A_ptr=F, dtb_ptr=F, seq_ptr="*i32", dec_ptr=F, etot_ptr=F),
                         dict(HB=8))
    kernels["gram"] = (K.ssd_gram_kernel, dict(B_ptr=P, C_ptr=P, gl_ptr=P), {})
    kernels["decode"] = (K.ssd_decode_kernel,
                         dict(state_ptr=F, x_ptr=P, dt_ptr=F, A_ptr=F, dtb_ptr=F, B_ptr=P, C_ptr=P,
                              D_ptr=F, z_ptr=P, y_ptr=P), {})


def resource_report(cubin):
    import os
    import re
    import subprocess
    import tempfile
    exe = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "k.cubin")
        open(f, "wb").write(cubin)
        out = subprocess.run([exe, "--dump-resource-usage", f], capture_output=True, text=True)
    txt = out.stdout + out.stderr
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", txt)
    return ("regs=%s stack=%s local=%s" % (m.group(1), m.group(2), m.group(4))) if m else txt[-300:]


def loop_report(cubin, top=12):
    """The largest loop of the SASS: its instruction count and the commonest opcodes.

    The forward kernel is issue-bound (ncu, NOTES.md), so instructions per loop iteration are a
    device-free proxy for its speed.
    """
    import collections
    import os
    import re
    import subprocess
    import tempfile
    exe = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "k.cubin")
        open(f, "wb").write(cubin)
        sass = subprocess.run([exe, "-sass", f], capture_output=True, text=True).stdout
    ins = []
    for line in sass.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    best = None
    loops = []
    for a, txt in ins:
        m = re.search(r"BRA\s+0x([0-9a-f]+)", txt)
        if m and int(m.group(1), 16) < a:
            tgt = int(m.group(1), 16)
            loops.append((sum(1 for b, _ in ins if tgt <= b <= a), tgt, a))
            if best is None or a - tgt > best[1] - best[0]:
                best = (tgt, a)
    if best is None:
        return "no loop"

    def opcodes(lo, hi):
        return collections.Counter(re.sub(r"^@!?U?P[T\d]+\s+", "", t).split()[0].split(".")[0]
                                   for a, t in ins if lo <= a <= hi)

    if opts.get("loops"):
        big = sorted((k for k in loops if k[0] >= opts["loops"]), reverse=True)
        print(f"    loops of {opts['loops']}+ instructions:", [k[0] for k in big])
        if opts.get("mix"):     # each one's local-memory and shared-memory traffic, barriers
            for n, lo, hi in big:
                ops = opcodes(lo, hi)
                print(f"      {n}:", {k: ops.get(k, 0) for k in
                                      ("LDL", "STL", "LDS", "STS", "LDGSTS", "BSSY", "BAR")})
    body = [t for a, t in ins if best[0] <= a <= best[1]]
    if opts.get("dump"):
        with open(opts["dump"], "w") as f:
            f.write("\n".join(body))
    return f"loop={len(body)} instr {opcodes(*best).most_common(top)}"


ints = {"T", "H", "G", "P", "N", "NS", "NPB", "HPP", "PER", "SLOT", "C0", "C1", "NCS", "k", "NSPAN"}
only = [k for k in opts.get("only", "").split("+") if k] if isinstance(opts.get("only"), str) else []
for name, (fn, ptrs, extra) in kernels.items():
    if only and name not in only:
        continue
    forced = FEATURES if opts.get("full") else {}
    flags = {k: v for k, v in {**common_flags, **extra, **forced}.items() if k in fn.arg_names}
    sig = sig_of(fn, ptrs, ints)
    div = {"T", "H", "P", "N", "NS", "PER", "SLOT"}
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names)
             if a in ptrs or a in div}
    src = ASTSource(fn, sig, constexprs=flags, attrs=attrs)
    try:
        o2 = dict(num_warps=opts["num_warps"], num_stages=opts["num_stages"])
        if opts.get("maxnreg"):
            o2["maxnreg"] = opts["maxnreg"]
        ck = triton.compile(src, target=target, options=o2)
        md = ck.metadata
        ptx = ck.asm["ptx"]
        res = resource_report(ck.asm['cubin'])
        print(f"{name}: {res} shared={md.shared} "
              f"wgmma={ptx.count('wgmma.mma_async')} mma.sync={ptx.count('mma.sync')}")
        if opts.get("sass"):
            print("   ", loop_report(ck.asm["cubin"]))
        if opts.get("ttgir"):
            with open(f"{opts['ttgir']}.{name}.ttgir", "w") as f:
                f.write(ck.asm["ttgir"])
    except Exception as e:  # noqa: BLE001
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:2000]}")
