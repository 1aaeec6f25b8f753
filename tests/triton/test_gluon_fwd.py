"""The forward's Gluon kernel (semisep.backends.triton.gluon_fwd) on the CPU.

The interpreter cannot run Gluon, so its numbers are checked on the GPU only
(benchmarks/gpu_ssd.py, section 1b: against the Triton kernel and float64). Here: which calls
take it, that the forward hands it the factored launch and still runs the exact one, and
that it compiles for sm_90 with its products left asynchronous in the SASS (the point of the
kernel: a wait for all of them after each would make it the Triton kernel's schedule
again).
"""

import math
import re
from types import SimpleNamespace

import pytest
import torch

from semisep.backends.triton import gluon_fwd as GF

needs_gluon = pytest.mark.skipif(GF.gluon is None, reason="this Triton has no Gluon Hopper API")


def _tensor(shape, dtype=torch.bfloat16, cuda=True, ptr=4096):
    return SimpleNamespace(shape=shape, dtype=dtype, is_cuda=cuda, data_ptr=lambda: ptr,
                           dim=lambda: len(shape))


def _opts(factored=True, gram=False, spans=False, n=2):
    first = SimpleNamespace(kwargs=dict(FACTORED=factored, GRAM=gram, SPANS=spans))
    return [first, SimpleNamespace(kwargs=dict(FACTORED=False, GRAM=False, SPANS=spans))][:n]


def _eligible(x=(8, 16384, 32, 64), B=(8, 16384, 1, 64), D=(32,), Q=64, opts=None, cap=(9, 0),
              **kw):
    """gluon_fwd.eligible on stand-ins of the given shapes (C as B) and keyword overrides."""
    wrap = lambda v: _tensor(v) if isinstance(v, tuple) else v  # noqa: E731
    args = dict(x=wrap(x), B=wrap(B), C=wrap(B), D=wrap(D) if D else None, z=None, h0=None,
                seq_idx=None)
    args.update(kw)
    return GF.eligible(args["x"], args["B"], args["C"], args["D"], args["z"], args["h0"],
                       args["seq_idx"], Q, opts or _opts(), capability=cap)


@needs_gluon
def test_which_calls_take_it(monkeypatch):
    monkeypatch.delenv("SEMISEP_TRITON_GLUON", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert _eligible()
    assert _eligible(x=(2, 4096, 8, 128), B=(2, 4096, 4, 64), D=None)
    thing = _tensor((1,))
    for why, kw in [
        ("fp16", dict(x=_tensor((8, 16384, 32, 64), torch.float16))),
        ("fp32", dict(x=_tensor((8, 16384, 32, 64), torch.float32))),
        ("on the CPU", dict(x=_tensor((8, 16384, 32, 64), cuda=False))),
        ("x misaligned", dict(x=_tensor((8, 16384, 32, 64), ptr=4098))),
        ("C misaligned", dict(C=_tensor((8, 16384, 1, 64), ptr=4104))),
        ("z", dict(z=thing)), ("h0", dict(h0=thing)), ("seq_idx", dict(seq_idx=thing)),
        ("D per p", dict(D=_tensor((32, 64)))),
    ]:
        assert not _eligible(**kw), why
    assert _eligible(B=(8, 16384, 1, 128)), "n = 128: B, C in two halves"
    assert not _eligible(B=(8, 16384, 1, 256)), "n = 256"
    assert not _eligible(B=(8, 16384, 1, 32)), "n = 32"
    x, b128 = _tensor((8, 16384, 32, 64)), _tensor((8, 16384, 1, 128))
    assert GF.wants_chunks_of_64(x, b128, None, None, None, None, capability=(9, 0))
    assert not GF.wants_chunks_of_64(x, _tensor((8, 16384, 1, 64)), None, None, None, None,
                                     capability=(9, 0)), "n = 64 plans chunks of 64 anyway"
    assert not GF.wants_chunks_of_64(x, b128, None, None, None, None, capability=(8, 0))
    assert not _eligible(x=(8, 16384, 32, 32)), "p = 32"
    assert not _eligible(x=(8, 16100, 32, 64), B=(8, 16100, 1, 64)), "T % 64"
    assert not _eligible(Q=32), "chunks of 32"
    assert not _eligible(opts=_opts(n=1)), "one launch"
    assert not _eligible(opts=_opts(factored=False)), "no factored launch"
    assert not _eligible(opts=_opts(gram=True)), "GRAM"
    assert not _eligible(opts=_opts(spans=True)), "spans"
    assert not _eligible(cap=(8, 0)) and not _eligible(cap=(10, 0)), "not sm_90"
    monkeypatch.setenv("SEMISEP_TRITON_GLUON", "0")
    assert not _eligible(), "turned off"


@pytest.mark.parametrize("grad", [False, True])
def test_launcher_hands_it_the_factored_launch(monkeypatch, grad):
    """With :func:`eligible` true, the forward gives its factored launch to
    :func:`launch_fwd` (a stand-in here: it writes twice the float64 reference's y and final
    state for the factorable (b, h), a mark that the Triton factored launch would overwrite,
    and records its arguments) and still runs the Triton kernel's exact launch for the
    others; a forward that autograd does not record hands it the pre-pass's factored rows
    only (``w_rows``: 2 rows, ``w = dt exp(-l)`` and ``exp(l)``), one that it records all."""
    from semisep.backends.triton import naive, ssd

    b, T, h, p, g, n, Q = 2, 48, 4, 16, 2, 16, 16
    x, B, C = _two_launch_call(monkeypatch, 5, b, T, h, p, g, n)
    per_step = math.log(2.0 ** -64) / Q
    la = torch.full((b, T, h), 1e-3 * per_step)
    la[0, :, 1] = 1.01 * per_step          # past FACTOR_MIN: the exact loop
    la[1, 20, 2] = -math.inf               # a reset: the exact loop
    yr, sr = naive.ssd_reference(x, la, B, C)
    calls = []

    def stand_in(x_, B_, C_, D_, dec, etot, y, hT, w_rows, pdl):
        assert not pdl       # the interpreter has no programmatic dependent launch
        least = etot[0].view(b, h, -1).min(-1).values
        for i in range(b):
            for j in range(h):
                if least[i, j] > 2.0 ** -64:
                    y[i, :, j] = 2 * yr[i, :, j].to(y.dtype)
                    hT[i, j] = 2 * sr[i, j].to(hT.dtype)
        if w_rows:      # w = dt exp(-l) (dt = 1 here) and exp(l), l within each chunk
            l2 = la.double().reshape(b, T // Q, Q, h).cumsum(2).permute(0, 3, 1, 2)
            e_in = l2.exp().reshape(b * h, T)
            assert rel(dec[1][0], e_in[0]) < 1e-6 and rel(dec[0][2], 1 / e_in[2]) < 1e-6
        calls.append((x_.shape, B_.shape, C_.shape, D_, y.shape, hT.shape, dec.shape[0],
                      w_rows))

    monkeypatch.setattr(GF, "eligible", lambda *a, **k: True)
    monkeypatch.setattr(GF, "launch_fwd", stand_in)
    with torch.set_grad_enabled(grad):
        y, hT = ssd(x.requires_grad_(grad), la, B, C, chunk_size=Q, return_final_state=True)
    rows = 8 if grad else 2       # with grad the backward's two rows too (launch._dec_rows)
    assert calls == [((b, T, h, p), (b, T, g, n), (b, T, g, n), None, (b, T, h, p),
                      (b, h, p, n), rows, not grad)]
    y, hT = y.detach(), hT.detach()
    exact = {(0, 1), (1, 2)}
    for i in range(b):
        for j in range(h):
            k = 1 if (i, j) in exact else 2     # the exact launch's heads, the stand-in's
            assert rel(y[i, :, j], k * yr[i, :, j]) < 1e-5, (i, j)
            assert rel(hT[i, j], k * sr[i, j]) < 1e-5, (i, j)


def test_launcher_plans_n128_for_it(monkeypatch):
    """Where :func:`wants_chunks_of_64` holds (n = 128 on sm_90), the forward is planned in
    chunks of 64 without GRAM: :func:`eligible` sees Q = 64, the factored launch goes to
    :func:`launch_fwd` (a stand-in writing twice the float64 reference, as above) and the
    exact launch, now in chunks of 64, still gives the reference for its heads."""
    from semisep.backends.triton import naive, ssd

    b, T, h, p, g, n = 1, 128, 2, 16, 1, 128
    x, B, C = _two_launch_call(monkeypatch, 6, b, T, h, p, g, n)
    la = torch.full((b, T, h), -1e-3)
    la[0, :, 1] = 1.01 * math.log(2.0 ** -64) / 64      # past FACTOR_MIN: the exact loop
    yr, sr = naive.ssd_reference(x, la, B, C)
    seen = []

    def stand_in(x_, B_, C_, D_, dec, etot, y, hT, w_rows, pdl):
        assert not pdl       # the interpreter has no programmatic dependent launch
        y[0, :, 0] = 2 * yr[0, :, 0].to(y.dtype)
        hT[0, 0] = 2 * sr[0, 0].to(hT.dtype)

    monkeypatch.setattr(GF, "wants_chunks_of_64", lambda *a, **k: True)
    monkeypatch.setattr(GF, "eligible", lambda *a, **k: seen.append(a[7]) or True)
    monkeypatch.setattr(GF, "launch_fwd", stand_in)
    y, hT = ssd(x, la, B, C, return_final_state=True)
    assert seen == [64]
    assert rel(y[0, :, 0], 2 * yr[0, :, 0]) < 1e-5 and rel(hT[0, 0], 2 * sr[0, 0]) < 1e-5
    assert rel(y[0, :, 1], yr[0, :, 1]) < 1e-5 and rel(hT[0, 1], sr[0, 1]) < 1e-5


def _two_launch_call(monkeypatch, seed, b, T, h, p, g, n):
    """Random x, B, C for a call launched as two kernels with the factored loop on (the
    forward's factored launch is the one this kernel takes)."""
    monkeypatch.setenv("SEMISEP_TRITON_FAST", "1")
    monkeypatch.setenv("SEMISEP_TRITON_ONE_LAUNCH", "0")
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, T, h, p, generator=gen), torch.randn(b, T, g, n, generator=gen),
            torch.randn(b, T, g, n, generator=gen))


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


def test_interpreter_never_takes_it(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not _eligible()


# run by conftest's compiled_for_sm90 (a fresh interpreter, no TRITON_INTERPRET)
_COMPILE = r"""
import json, os, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from semisep.backends.triton import gluon_fwd as GF
gl = GF.gl
lay = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
desc = f"tensordesc<bf16[64, 64],{lay!r}>"
sig = {name: desc for name in ("x_desc", "b_desc", "c_desc", "y_desc")}
sig.update({name: "*fp32" for name in ("dec_ptr", "etot_ptr", "D_ptr", "hT_ptr")})
sig.update({name: "i32" for name in ("T", "H", "G", "NC", "PT")})
consts = dict(Q=64, P=64, N=64, STAGES=2, HAS_D=True, FACTOR_MIN=2.0 ** -64, W_ROWS=True,
              PDL=True)
sig.update({name: "constexpr" for name in consts})
tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
if not os.path.exists(tool):
    print(json.dumps(None))
    sys.exit()
k = triton.compile(GluonASTSource(GF.ssd_fwd_gluon_kernel, sig, consts),
                   target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, launch_pdl=True))
cubin = os.path.join(os.environ["TRITON_CACHE_DIR"], "k.cubin")
open(cubin, "wb").write(k.asm["cubin"])
run = lambda *a: subprocess.run([tool, *a, cubin], capture_output=True, text=True).stdout
print(json.dumps([run("--dump-resource-usage"), run("-sass")]))
"""


@needs_gluon
@pytest.mark.parametrize("n, products, w_rows", [
    (64, 16, True), (64, 16, False), (128, 28, True), (128, 28, False)])
def test_compiles_for_sm90_with_asynchronous_products(compiled_for_sm90, n, products, w_rows):
    """No stack; the products a chunk (four wgmma each at n = 64; at n = 128 C B^T and C S^T
    as two of K = 64 and the state's update one a half: 7 x 4); waits that leave some of
    them in flight, and one full wait only, y's (with G masked by a select right after its
    wait, ptxas waited a second time, before x is read: gluon_fwd._masked_g); with the
    pre-pass's factored rows (``W_ROWS``, a forward without autograd) and all of them; as a
    programmatic dependent launch, its wait for the pre-pass (``griddepcontrol.wait``:
    ACQBULK) before any load."""
    usage, sass = compiled_for_sm90(_COMPILE.replace("N=64, STAGES=2",
                                                     f"N={n}, STAGES={GF.STAGES[n]}")
                                    .replace("W_ROWS=True", f"W_ROWS={w_rows}"))
    assert re.search(r"STACK:0\b", usage), usage
    assert sass.count("HGMMA.64x64x16.F32.BF16") == products
    assert len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x[1-9]", sass)) >= 2
    assert sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x0") == 1
    # G masked by its mask words (ANDs): the select form has 32 FSEL a chunk, this kernel none
    assert "FSEL" not in sass
    assert sass.count("ACQBULK") == 1 and sass.index("ACQBULK") < sass.index("LDG")


def test_plan_for_n128_takes_chunks_of_64_where_launched_twice():
    """An n = 128 forward planned for this kernel (``gluon_chunks``) runs chunks of 64 without
    GRAM where it is launched as two kernels; a call small enough for one launch plans as
    it would without the kernel (test_column_blocks.test_n128_forward_plan), as does the
    same call not planned for it."""
    from semisep.backends.triton.launch import _fwd_plan

    def plan(T, gluon):
        Q, _, _, _, gram, opts, _, _ = _fwd_plan(8, T, 32, 64, 1, 128, torch.bfloat16, True,
                                                 False, False, 1, False, False, False, -1,
                                                 True, True, gluon)
        return Q, gram is not None, len(opts)

    assert plan(16384, True) == (64, False, 2)
    default = plan(16384, False)
    assert default[0] != 64 or default[1], default
    assert plan(1024, True) == plan(1024, False)
