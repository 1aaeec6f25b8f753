"""The README's main job runs and its checks pass."""

import subprocess
import sys

from semisep import demo


def test_demo_quick_checks_pass(capsys, tmp_path):
    assert demo.main(["--quick", "--plot", str(tmp_path / "demo.png")]) == 0
    out = capsys.readouterr().out
    assert "all agree: True" in out
    assert (tmp_path / "demo.png").stat().st_size > 1000


def test_module_entry_point_usage():
    result = subprocess.run([sys.executable, "-m", "semisep"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage: python -m semisep" in result.stderr


def test_module_entry_point_help_and_unknown_command(capsys):
    from semisep.__main__ import main

    assert main(["--help"]) == 0 and "usage: python -m semisep" in capsys.readouterr().out
    assert main(["demos"]) == 2 and "unknown command 'demos'" in capsys.readouterr().err
