"""The knobs of the Triton launchers (semisep.backends.triton.config)."""

from semisep.backends.triton.config import _env


def test_env_reads_like_os_environ(monkeypatch):
    monkeypatch.delenv("SEMISEP_TEST_KNOB", raising=False)
    assert _env("SEMISEP_TEST_KNOB") is None and _env("SEMISEP_TEST_KNOB", "d") == "d"
    monkeypatch.setenv("SEMISEP_TEST_KNOB", "BP=32,é")
    assert _env("SEMISEP_TEST_KNOB", "d") == "BP=32,é"
    monkeypatch.setenv("SEMISEP_TEST_KNOB", "")
    assert _env("SEMISEP_TEST_KNOB", "d") == ""
