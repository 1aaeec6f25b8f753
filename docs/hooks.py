"""MkDocs hook: render the reStructuredText leftovers of numpydoc docstrings.

mkdocstrings renders the docstrings as Markdown, so Sphinx roles
(``:func:`name```) come out as ``:func:`` before the code, and the double
backticks of the parameter types stay literal inside their code cells. Both
are only markup; this drops it from the rendered HTML of the API pages.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:mod|func|meth|class|attr|data|obj|exc):<code>~?")
DOUBLE_BACKTICKS = re.compile(r"``(.+?)``")


def on_page_content(html, page, config, files):
    if not page.file.src_uri.startswith("api/"):
        return html
    return DOUBLE_BACKTICKS.sub(r"\1", ROLE.sub("<code>", html))
