"""The backward's Gluon sweeps (semisep.backends.triton.gluon_bwd) on the CPU.

The interpreter cannot run Gluon, so the kernels' numbers are checked on the GPU only
(benchmarks/gpu_ssd.py, section 1b: against the Triton kernels and float64). Here: which calls
take them; that the backward hands them its factored launches with the arguments their
docstrings promise (a float64 twin of each kernel, written from gluon_bwd's module docstring,
stands in for it, and the gradients of the whole call must match float64), still running the
Triton kernels' exact launches for the other heads; and that both compile for sm_90 with
their products left asynchronous in the SASS.
"""

import re
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semisep.backends.triton import gluon_bwd as GB

needs_gluon = pytest.mark.skipif(GB.gluon is None, reason="this Triton has no Gluon Hopper API")


def _tensor(shape, dtype=torch.bfloat16, cuda=True, ptr=4096):
    return SimpleNamespace(shape=shape, dtype=dtype, is_cuda=cuda, data_ptr=lambda: ptr,
                           dim=lambda: len(shape))


def _block(c0=0, width=64, factored=True, e_on_c=True, bp=64, n=2):
    opt = lambda f, **k: SimpleNamespace(kwargs=dict(FACTORED=f, BP=bp, **k))  # noqa: E731
    fwd = [opt(factored), opt(False)][:n]
    rev = [opt(factored, E_ON_C=e_on_c), opt(False, E_ON_C=e_on_c)][:n]
    return (c0, width, fwd, rev)


def _eligible(x=(8, 16384, 32, 64), B=(8, 16384, 1, 64), D=(32,), st=torch.bfloat16, Q=64,
              spans=1, blocks=None, atomic=True, has_dt=True, cap=(9, 0), **kw):
    """gluon_bwd.eligible on stand-ins of the given shapes (C as B, dy as x) and keyword
    overrides."""
    wrap = lambda v: _tensor(v) if isinstance(v, tuple) else v  # noqa: E731
    args = dict(x=wrap(x), B=wrap(B), C=wrap(B), dy=wrap(x), D=wrap(D) if D else None,
                h0=None, seq_idx=None, dhT=None)
    args.update(kw)
    if blocks is None:
        blocks = [_block(c0) for c0 in range(0, args["B"].shape[3], 64)]
    return GB.eligible(args["x"], args["B"], args["C"], args["dy"], st, args["D"], args["h0"],
                       args["seq_idx"], args["dhT"], has_dt, Q, spans, blocks, atomic,
                       capability=cap)


@needs_gluon
def test_which_calls_take_it(monkeypatch):
    monkeypatch.delenv("SEMISEP_TRITON_GLUON", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    big = (8, 16384, 32, 64)
    assert _eligible()
    assert _eligible(B=(8, 16384, 1, 128), D=None), "n = 128: two blocks"
    assert _eligible(x=(8, 8192, 32, 64), B=(8, 8192, 1, 64)), "b h T n = 2^27"
    assert not _eligible(x=(8, 4096, 32, 64), B=(8, 4096, 1, 64)), "below AT_LEAST"
    thing = _tensor((1,))
    for why, kw in [
        ("fp16", dict(x=_tensor(big, torch.float16))),
        ("fp32", dict(x=_tensor(big, torch.float32))),
        ("dy fp32", dict(dy=_tensor(big, torch.float32))),
        ("fp32 states", dict(st=torch.float32)),
        ("on the CPU", dict(x=_tensor(big, cuda=False))),
        ("x misaligned", dict(x=_tensor(big, ptr=4098))),
        ("dy misaligned", dict(dy=_tensor(big, ptr=4100))),
        ("B misaligned", dict(B=_tensor((8, 16384, 1, 64), ptr=4104))),
        ("C misaligned", dict(C=_tensor((8, 16384, 1, 64), ptr=4104))),
        ("h0", dict(h0=thing)), ("seq_idx", dict(seq_idx=thing)), ("dhT", dict(dhT=thing)),
        ("D per p", dict(D=_tensor((32, 64)))),
        ("p = 128", dict(x=_tensor((8, 16384, 32, 128)), dy=_tensor((8, 16384, 32, 128)))),
        ("T % 64", dict(x=_tensor((8, 16100, 32, 64)), dy=_tensor((8, 16100, 32, 64)),
                        B=_tensor((8, 16100, 1, 64)))),
        ("b h T >= 2^31", dict(x=_tensor((2 ** 13, 2 ** 13, 32, 64)),
                                dy=_tensor((2 ** 13, 2 ** 13, 32, 64)),
                                B=_tensor((2 ** 13, 2 ** 13, 1, 64)))),
        ("T g n >= 2^31", dict(x=_tensor((1, 2 ** 24, 2, 64)), dy=_tensor((1, 2 ** 24, 2, 64)),
                               B=_tensor((1, 2 ** 24, 2, 64)))),
        ("chunks of 32", dict(Q=32)), ("spans", dict(spans=2)),
        ("deterministic", dict(atomic=False)), ("log_a, no dt", dict(has_dt=False)),
        ("one launch", dict(blocks=[_block(n=1)])),
        ("no factored launch", dict(blocks=[_block(factored=False)])),
        ("e_in on dy", dict(blocks=[_block(e_on_c=False)])),
        ("p-blocks of 32", dict(blocks=[_block(bp=32)])),
        ("a block of 128", dict(B=_tensor((8, 16384, 1, 128)), blocks=[_block(width=128)])),
        ("not sm_90", dict(cap=(8, 0))), ("sm_100", dict(cap=(10, 0))),
    ]:
        assert not _eligible(**kw), why
    monkeypatch.setenv("SEMISEP_TRITON_GLUON", "0")
    assert not _eligible(), "turned off"


def test_interpreter_never_takes_it(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not _eligible()


# float64 twins of the two kernels, from gluon_bwd's module docstring, for the (b, h) whose
# chunks all decay by more than FACTOR_MIN, with the launchers' arguments


def _rows(dec, etot, b, h):
    """The pre-pass rows the kernels read, as (b, h, T) float64 views, and exp(l_end)."""
    nc = etot.shape[-1]
    dec = dec.reshape(-1, b, h, dec.shape[-1]).double()
    dtv, e_in, inv, keep, sig = dec[0], dec[3], dec[5], dec[6], dec[7]
    e_tot = etot.reshape(-1, b, h, nc)[0].double()
    return dtv, e_in, inv, keep, sig, e_tot, nc


def _columns(t, shape):
    """The (b, T, g, 64) columns of a (b, T, g, n) buffer given from its block's first
    column on (a flat view there)."""
    b, T, g, n = shape
    return t.as_strided((b, T, g, 64), (T * g * n, g * n, n, 1))


def _factored_heads(x, B, e_tot, record, entry):
    """The (b, h, group) of each head whose chunks all decay by more than FACTOR_MIN (the
    Gluon kernels' programs; the exact launch runs the others), recording ``entry`` with the
    list of the (b, h) given so far appended (``record``: the calls, as the test reads them)."""
    b, _, h, _ = x.shape
    ran = []
    record.append(entry + (ran,))
    for i in range(b):
        for j in range(h):
            if e_tot[i, j].min() > 2.0 ** -64:
                ran.append((i, j))
                yield i, j, j // (h // B.shape[2])


def _twin_fwdsweep(x, dy, B, C, c0, dec, etot, dC, w, dD, states, record):
    b, T, h, p = x.shape
    dtv, e_in, inv, keep, sig, e_tot, nc = _rows(dec, etot, b, h)
    Q = T // nc
    dCc = _columns(dC, B.shape)
    for i, j, k in _factored_heads(x, B, e_tot, record,
                                   ("fwd", c0, dD is not None, dC.data_ptr())):
        S = torch.zeros(p, 64, dtype=torch.float64)
        for c in range(nc):
            t = slice(c * Q, (c + 1) * Q)
            X, DY = x[i, t, j].double(), dy[i, t, j].double()
            Bc, Cc = B[i, t, k, c0:c0 + 64].double(), C[i, t, k, c0:c0 + 64].double()
            ei = e_in[i, j, t]
            u = X * (dtv[i, j, t] * inv[i, j, t])[:, None]
            states[i, j, c] = S.to(states.dtype)
            G, M = Cc @ Bc.T, DY @ u.T
            Pm = torch.tril(G * M, -1) * ei[:, None]
            dyS = DY @ S
            w.view(b, h, T)[i, j, t] = (ei * (dyS * Cc).sum(1) + Pm.sum(1)
                                        - Pm.sum(0)).float()
            dCc[i, t, k] += (ei[:, None] * (torch.tril(M) @ Bc + dyS)).float()
            if dD is not None:
                dD[j] += (DY * X).sum().float()
            S = e_tot[i, j, c] * (S + u.T @ Bc)


def _twin_revsweep(x, dy, B, C, c0, dec, etot, states, w, A, D, dx, dB, ddt, dsum, record):
    b, T, h, p = x.shape
    dtv, e_in, inv, keep, sig, e_tot, nc = _rows(dec, etot, b, h)
    Q = T // nc
    dBc = _columns(dB, B.shape)
    upper = torch.ones(Q, Q, dtype=torch.bool).triu()          # [j, i]: i >= j
    for i, j, k in _factored_heads(x, B, e_tot, record,
                                   ("rev", c0, D is not None, dB.data_ptr(), ddt.data_ptr())):
        dS = torch.zeros(p, 64, dtype=torch.float64)
        for c in reversed(range(nc)):
            t = slice(c * Q, (c + 1) * Q)
            X, DY = x[i, t, j].double(), dy[i, t, j].double()
            Bc, Cc = B[i, t, k, c0:c0 + 64].double(), C[i, t, k, c0:c0 + 64].double()
            dt_, inv_, et = dtv[i, j, t], inv[i, j, t], e_tot[i, j, c]
            xs, cv = X * dt_[:, None], Cc * e_in[i, j, t][:, None]
            cross = et * (dS * states[i, j, c].double()).sum()
            dsx = et * dS
            st = Bc @ dsx.T
            acc = torch.where(upper, Bc @ cv.T, 0.0) @ DY + st
            d = acc * (inv_ * dt_)[:, None]
            if D is not None:
                d = d + DY * D[j].double()
            if c0 > 0:
                d = d + dx[i, t, j].double()
            dx[i, t, j] = d.to(dx.dtype)
            dBc[i, t, k] += ((torch.where(upper, xs @ DY.T, 0.0) @ cv + xs @ dsx)
                             * inv_[:, None]).float()
            dS = DY.T @ cv + dsx
            r2 = (X * st).sum(1) * (dt_ * inv_)
            wc = w.view(b, h, T)[i, j, t].double()
            suf = wc.flip(0).cumsum(0).flip(0) + (r2.cumsum(0) - r2)
            dla = (suf + cross) * keep[i, j, t]
            g_dt = ((acc * X).sum(1) * inv_ + A[j].double() * dla) * sig[i, j, t]
            ddt.view(-1, b, T, h)[0, i, t, j] = g_dt.float()
            dsum.view(-1)[j] += (dla * dt_).sum().float()        # dA's sums, then
            dsum.view(-1)[h + j] += g_dt.sum().float()          # d dt_bias's


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


@settings(max_examples=6, deadline=None)
@given(n=st.sampled_from([64, 128]), T=st.sampled_from([64, 192]), p=st.sampled_from([8, 16]),
       g=st.sampled_from([1, 2]), gate=st.booleans(), with_d=st.booleans(),
       exact_head=st.booleans(), seed=st.integers(0, 100))
def test_backward_hands_them_the_factored_launches(n, T, p, g, gate, with_d, exact_head, seed):
    """With :func:`eligible` true, the backward gives each block's factored launches to
    :func:`launch_fwdsweep` and :func:`launch_revsweep` (their float64 twins here) and runs
    the Triton kernels' exact launches for the other heads (one decaying past FACTOR_MIN
    where drawn): every gradient matches float64. n = 128: two blocks of columns (dC and dB
    from column 64, D's terms with the first, the second adding its dx); z and D as drawn."""
    from semisep.backends.triton import naive, ssd

    b, h = 2, 4
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, T, h, p, generator=gen)
    dt = torch.rand(b, T, h, generator=gen) * 0.5
    A = -0.5 * torch.rand(h, generator=gen) - 0.05      # at most ~35 of log-decay a chunk
    if exact_head:
        A[1] = -1e4                              # past FACTOR_MIN in every chunk: exact
    B = torch.randn(b, T, g, n, generator=gen)
    C = torch.randn(b, T, g, n, generator=gen)
    D = torch.randn(h, generator=gen) if with_d else None
    dtb = torch.randn(h, generator=gen) * 0.3
    z = torch.randn(b, T, h, p, generator=gen) if gate else None
    ins = [t for t in (x, dt, A, B, C, D, dtb, z) if t is not None]
    for t in ins:
        t.requires_grad_(True)
    kw = dict(dt=dt, A=A, D=D, dt_bias=dtb, dt_softplus=True, z=z)
    gy = torch.randn(b, T, h, p, generator=gen)
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMISEP_TRITON_FAST", "1")
        mp.setenv("SEMISEP_TRITON_ONE_LAUNCH", "0")
        mp.setattr(GB, "eligible", lambda *a, **k: True)
        mp.setattr(GB, "launch_fwdsweep", lambda *a: _twin_fwdsweep(*a, calls))
        mp.setattr(GB, "launch_revsweep", lambda *a: _twin_revsweep(*a, calls))
        y = ssd(x, None, B, C, chunk_size=64, **kw)
        got = torch.autograd.grad((y * gy).sum(), ins)
    yr, _ = naive.ssd_reference_chunked(x, None, B, C, **kw)
    want = torch.autograd.grad((yr * gy.double()).sum(), ins)
    firsts = list(range(0, n, 64))
    assert [(kind, c0, first and with_d) for kind, c0, first, *_ in calls] == [
        (kind, c0, c0 == 0 and with_d) for c0 in firsts for kind in ("fwd", "rev")]
    # every sweep ran the (b, h) that decay by less than FACTOR_MIN: all but head 1 if drawn
    factored = [(i, j) for i in range(b) for j in range(h) if not (exact_head and j == 1)]
    assert all(call[-1] == factored for call in calls)
    if n == 128:
        # the second block's dC and dB 64 columns on (fp32), its dt gradient partial after
        # the first's
        assert calls[2][3] - calls[0][3] == calls[3][3] - calls[1][3] == 64 * 4
        assert calls[3][4] - calls[1][4] == b * T * h * 4
    names = [nm for nm, t in zip(["dx", "ddt", "dA", "dB", "dC", "dD", "ddt_bias", "dz"],
                                 (x, dt, A, B, C, D, dtb, z)) if t is not None]
    for name, a, r in zip(names, got, want):
        assert rel(a, r) < 1e-5, (name, rel(a, r))


# run by conftest's compiled_for_sm90 (a fresh interpreter, no TRITON_INTERPRET)
_COMPILE = r"""
import json, os, subprocess, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from semisep.backends.triton import gluon_bwd as GB
gl = GB.gl
lay = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
desc = f"tensordesc<bf16[64, 64],{lay!r}>"
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
if not os.path.exists(tool):
    print(json.dumps(None))
    sys.exit()
kinds = {
    "fwdsweep": (GB.ssd_bwd_fwdsweep_gluon_kernel,
                 ("x_desc", "dy_desc", "b_desc", "c_desc", "st_desc"),
                 ("dec_ptr", "etot_ptr", "dC_ptr", "w_ptr", "dD_ptr"), {}),
    "revsweep": (GB.ssd_bwd_revsweep_gluon_kernel,
                 ("x_desc", "dy_desc", "b_desc", "c_desc", "st_desc", "dx_desc"),
                 ("dec_ptr", "etot_ptr", "w_ptr", "A_ptr", "D_ptr", "dB_ptr", "ddt_ptr",
                  "dsum_ptr"), {"ACC_DX": False}),
    "revsweep_acc": (GB.ssd_bwd_revsweep_gluon_kernel,
                     ("x_desc", "dy_desc", "b_desc", "c_desc", "st_desc", "dx_desc"),
                     ("dec_ptr", "etot_ptr", "w_ptr", "A_ptr", "D_ptr", "dB_ptr", "ddt_ptr",
                      "dsum_ptr"), {"ACC_DX": True}),
}
out = {}
for name, (kernel, descs, ptrs, extra) in kinds.items():
    sig = {k: desc for k in descs}
    sig.update({k: "*fp32" for k in ptrs})
    sig.update({k: "i32" for k in ("T", "H", "G", "NC", "C0")})
    consts = dict(Q=64, P=64, N=64, NT=128, STAGES=2, HAS_D=True, **extra,
                  FACTOR_MIN=2.0 ** -64)
    sig.update({k: "constexpr" for k in consts})
    k = triton.compile(GluonASTSource(kernel, sig, consts), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=4))
    cubin = os.path.join(os.environ["TRITON_CACHE_DIR"], name + ".cubin")
    open(cubin, "wb").write(k.asm["cubin"])
    run = lambda *a: subprocess.run([tool, *a, cubin], capture_output=True, text=True).stdout
    out[name] = [run("--dump-resource-usage"), run("-sass")]
print(json.dumps(out))
"""


@needs_gluon
def test_compiles_for_sm90_with_asynchronous_products(compiled_for_sm90):
    got = compiled_for_sm90(_COMPILE)
    # products of four wgmma each a chunk: five in the forward sweep, seven in the reverse
    for name, wgmma in (("fwdsweep", 20), ("revsweep", 28), ("revsweep_acc", 28)):
        usage, sass = got[name]
        # a few spilled registers at most (Triton 3.6, the device's: 0 / 48 B; 3.9: 48 / 136)
        stack = int(re.search(r"STACK:(\d+)", usage).group(1))
        assert stack <= 160, (name, usage)
        assert sass.count("HGMMA.64x64x16.F32.BF16") == wgmma, name
        # waits that leave products in flight; ptxas serializing them (its C7514) would put
        # a wait after every wgmma
        assert len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x[1-9]", sass)) >= 3, name
        assert sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x0") < wgmma // 4, name
