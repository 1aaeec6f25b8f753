"""The docs stay true: every ```python block in docs/ and README.md runs, the site builds
with ``mkdocs build --strict``, and the repository is ruff clean.

The blocks of one page run in order in one namespace (a page is one session),
in a temporary working directory, with matplotlib drawing off screen.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# docs/design.md is the design contract copied verbatim; its API listing names the calls
# (M1, dense, ...), it is not a program.
NOT_PROGRAMS = {ROOT / "docs" / "design.md"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced ```python block of a Markdown text, in order."""
    blocks = []
    for match in FENCE.finditer(text):
        if match["lang"] == "python":
            indent = len(match["indent"])
            code = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
            blocks.append((text.count("\n", 0, match.start()) + 2, code))
    return blocks


def test_python_blocks_are_found():
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n  ```python\n  y = x\n  ```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (9, "y = x\n")]


PAGES = [page for page in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
         if page not in NOT_PROGRAMS and python_blocks(page.read_text())]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, tmp_path, monkeypatch):
    blocks = python_blocks(page.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": f"docs_{page.stem}"}
    for line, code in blocks:
        name = f"{page.relative_to(ROOT)}:{line}"
        try:
            exec(compile(code, name, "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the python block at {name} fails: "
                                 f"{type(exc).__name__}: {exc}") from exc


def test_readme_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    for marker in ("<!-- demo-command -->", "<!-- test-command -->"):
        after = text.split(marker, 1)[1].lstrip()
        assert marker in text and after.startswith("```bash\n"), marker


def test_readme_links_exist():
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\((?!https?://|#)([^)#]+)", text)
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_api_reference_covers_the_public_names():
    import semisep

    directives = set(re.findall(r"^::: (\S+)", "\n".join(
        page.read_text() for page in (ROOT / "docs" / "api").glob("*.md")), flags=re.M))
    missing = []
    for name in semisep.__all__:
        obj = getattr(semisep, name)
        module = getattr(obj, "__module__", None) or ""
        documented = {f"semisep.{name}", f"{module}.{name}"} & directives or any(
            module == d or module.startswith(d + ".") for d in directives)
        if name != "__version__" and not documented:
            missing.append(name)
    assert not missing, f"semisep.{missing} are missing from docs/api/*.md"


def test_mkdocs_build_strict(tmp_path):
    if not _has_module("mkdocs"):
        pytest.fail("mkdocs is not installed: pip install -e '.[test]'")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    for page in ("index.html", "getting-started/index.html", "concepts/chunked/index.html",
                 "api/core/index.html"):
        assert (site / page).is_file(), page
    api = (site / "api/core/index.html").read_text()
    assert "state_size" in api and "return_final_state" in api      # mkdocstrings rendered


def test_ruff_clean():
    if not _has_module("ruff"):
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None
