"""Sphinx configuration of the provider's doc set (``make docs``: warnings are errors, nitpicky).

The pages are MyST Markdown (https://myst-parser.readthedocs.io/): the user guide came from Markdown
and the design notes are Markdown that GitHub renders too. Code shown on a page is a ``literalinclude``
of a file a test runs (the example DAGs of ``dags/``, ``docs/examples/``); every shell command shown is
a ``console`` block with a ``$`` prompt, and ``tests/docs/test_commands.py`` runs each one or names the
test that does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tomllib

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "airflow-provider-gang"
author = "The airflow-provider-gang authors"
copyright = "2026, the airflow-provider-gang authors"
release = tomllib.loads((DOCS.parent / "pyproject.toml").read_text())["project"]["version"]

extensions = ["myst_parser", "gang_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples"]

# `[text](page.md#a-heading)` links resolve to the heading's slug, as on GitHub.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

html_theme = "furo"
html_title = "airflow-provider-gang"
# No network during the build: no intersphinx inventories, no remote images.
html_static_path: list[str] = []
