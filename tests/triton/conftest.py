"""Run the Triton kernels under the interpreter (CPU), before triton compiles anything.

Skips the whole folder when triton is not installed.
"""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import pytest

os.environ["TRITON_INTERPRET"] = "1"

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    # if another test imported the kernels in compiled mode, re-create them interpreted
    # (the module object is reused, so ops' reference to it sees the new kernels)
    for name in ("semisep.backends.triton.gate", "semisep.backends.triton.kernels"):
        if name in sys.modules:
            importlib.reload(sys.modules[name])


@pytest.fixture
def triton_on_cpu(monkeypatch):
    """Let the registry's "triton" backend own CPU tensors (interpreter) inside one test."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("SEMISEP_TRITON_CPU", "1")
    yield


@pytest.fixture
def compiled_for_sm90():
    """``run(script)``: the JSON of the last line ``script`` prints, run in a fresh
    interpreter without ``TRITON_INTERPRET`` (under it Gluon's own jit helpers are
    interpreted functions, which its compiler refuses) and with an empty Triton cache in
    ``TRITON_CACHE_DIR``; skips the test where the script prints null (this Triton ships no
    cuobjdump)."""
    def run(script, timeout=600):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        with tempfile.TemporaryDirectory() as cache:
            env["TRITON_CACHE_DIR"] = cache
            out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                 text=True, timeout=timeout)
        assert out.returncode == 0, out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if got is None:
            pytest.skip("this Triton ships no cuobjdump")
        return got
    return run
