"""The knobs of the Triton launchers (semisep.backends.triton.config)."""

import inspect
import re

import torch

from semisep.backends.triton import config
from semisep.backends.triton import launch as L
from semisep.backends.triton.config import KNOBS, ONE_LAUNCH_AT_MOST, _env, _launches


def test_env_reads_like_os_environ(monkeypatch):
    monkeypatch.delenv("SEMISEP_TEST_KNOB", raising=False)
    assert _env("SEMISEP_TEST_KNOB") is None and _env("SEMISEP_TEST_KNOB", "d") == "d"
    monkeypatch.setenv("SEMISEP_TEST_KNOB", "BP=32,é")
    assert _env("SEMISEP_TEST_KNOB", "d") == "BP=32,é"
    monkeypatch.setenv("SEMISEP_TEST_KNOB", "")
    assert _env("SEMISEP_TEST_KNOB", "d") == ""


def test_small_calls_launch_each_kernel_once(monkeypatch):
    """(FACTORED, ONE_LAUNCH) per launch: one launch up to ONE_LAUNCH_AT_MOST, a launch per
    loop kind above, the knob forcing either; the exact loop alone where programs don't
    choose."""
    monkeypatch.delenv("SEMISEP_TRITON_ONE_LAUNCH", raising=False)
    one, two = ((False, True),), ((True, False), (False, False))
    assert _launches(True, ONE_LAUNCH_AT_MOST) == one
    assert _launches(True, ONE_LAUNCH_AT_MOST + 1) == two
    assert _launches(False, 1) == _launches(False, 2 ** 40) == ((False, False),)
    monkeypatch.setenv("SEMISEP_TRITON_ONE_LAUNCH", "0")
    assert _launches(True, 1) == two
    monkeypatch.setenv("SEMISEP_TRITON_ONE_LAUNCH", "1")
    assert _launches(True, 2 ** 40) == one


def test_launch_plans_follow_the_knobs(monkeypatch):
    """Every knob the config reads is in KNOBS (part of a launch plan's key), and a knob set
    between two calls changes what the next call launches."""
    names = set(re.findall(r'_env\("([A-Z0-9_]+)"', inspect.getsource(config)))
    assert names | {"SEMISEP_TRITON_FWD", "SEMISEP_TRITON_BWD"} <= set(KNOBS)
    launched = []
    monkeypatch.setattr(L, "launch", lambda kernel, grid, *args, arg_key, opts:
                        launched.append((kernel, opts.kwargs)))
    b, T, h, p, n = 1, 32, 2, 16, 16
    x, B = torch.randn(b, T, h, p), torch.randn(b, T, 1, n)
    la = -torch.rand(b, T, h)

    def fwd_launches():
        launched.clear()
        L._fwd(x, la, None, B, B, None, None, None, None, None, False, False, 16)
        return [(k.__name__, kw.get("ONE_LAUNCH")) for k, kw in launched]

    monkeypatch.delenv("SEMISEP_TRITON_ONE_LAUNCH", raising=False)
    one = [("ssd_decays_kernel", None), ("ssd_fwd_kernel", True)]
    assert fwd_launches() == one
    monkeypatch.setenv("SEMISEP_TRITON_ONE_LAUNCH", "0")
    assert fwd_launches() == [("ssd_decays_kernel", None), ("ssd_fwd_kernel", False),
                              ("ssd_fwd_kernel", False)]
    monkeypatch.delenv("SEMISEP_TRITON_ONE_LAUNCH")
    assert fwd_launches() == one


def test_launch_plans_are_bounded(monkeypatch):
    """Plans are keyed by shapes (T among them): past MAX_ENTRIES the cache starts again."""
    monkeypatch.setattr(L, "MAX_ENTRIES", 2)
    monkeypatch.setattr(L, "_PLANS", {})
    built = []
    for T in (1, 2, 3, 1):
        assert L._plan(lambda t: built.append(t) or t, T) == T
        assert len(L._PLANS) <= 2
    assert built == [1, 2, 3, 1]        # 1 was dropped when 3 came in


def test_exact_loop_stages_reach_every_sweep(monkeypatch):
    """``EXACT_STAGES`` (a field of SEMISEP_TRITON_FWD / _BWD) reaches the forward and both
    backward sweeps, 0 (the launch's stages) when unset; the loop takes it for its exact kind
    only (kernels._stages)."""
    from semisep.backends.triton import kernels as K
    monkeypatch.setenv("SEMISEP_TRITON_FWD", "EXACT_STAGES=1")
    monkeypatch.setenv("SEMISEP_TRITON_BWD", "EXACT_STAGES=2")
    # b, T, h, p, g, n, dtype, has_dt, dt_softplus, has_dtb, D_dim, (has_z,) has_h0, has_seq
    head, tail = (1, 256, 2, 16, 1, 16, torch.float32, False, False, False, None), (False, True)
    args = (*head, False, *tail)
    fwd = L._fwd_plan(*args, -1, True)[5]
    bwd = [o for _, _, f, r in L._bwd_plan(*head, *tail, False, False, -1, True)[5]
           for o in f + r]
    assert [o.kwargs["EXACT_STAGES"] for o in fwd] == [1] * len(fwd)
    assert [o.kwargs["EXACT_STAGES"] for o in bwd] == [2] * len(bwd)
    monkeypatch.delenv("SEMISEP_TRITON_FWD")
    assert all(o.kwargs["EXACT_STAGES"] == 0 for o in L._fwd_plan(*args, -1, True)[5])
    assert (K._stages(0, 1), K._stages(1, 1), K._stages(0, 0)) == (1, None, None)
