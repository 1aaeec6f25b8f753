"""Run the Triton kernels under the interpreter (CPU), before triton compiles anything.

Skips the whole folder when triton is not installed.
"""

import importlib
import importlib.util
import os
import sys

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
