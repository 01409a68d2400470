"""The doc set's ``generated-table`` directive (``docs/_ext/gang_docs.py``): a table rendered by code
at build time, parsed as the markup of the page it stands on; a path that gives no table fails the
build with ``-W``, naming the path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.docs.pages import DOCS

MARKDOWN_TABLE = "| argument | default |\n|---|---|\n| `size` | required |\n| `startup_timeout` | 600 s |\n"
RST_TABLE = "=========  =======\nargument   default\n=========  =======\n``size``   required\n=========  =======\n"


def _build(tmp_path: Path, page: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "source"
    source.mkdir()
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\nsys.path.insert(0, {str(tmp_path)!r})\n"
        'extensions = ["myst_parser", "gang_docs"]\nsource_suffix = {".md": "markdown"}\n'
    )
    (source / "index.md").write_text(textwrap.dedent(page))
    (tmp_path / "tables.py").write_text(
        f"def markdown():\n    return {MARKDOWN_TABLE!r}\n\ndef rst():\n    return {RST_TABLE!r}\n\n"
        "def nothing():\n    return ''\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-n", "-q", "-b", "html", str(source), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.timeout(150)
def test_a_markdown_and_an_rst_table_are_rendered_in_place(tmp_path: Path) -> None:
    page = """\
    # Arguments

    ```{generated-table} tables:markdown
    ```

    ```{eval-rst}
    .. generated-table:: tables:rst
    ```
    """
    result = _build(tmp_path, page)
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "html" / "index.html").read_text()
    assert html.count("<table") == 2
    assert "startup_timeout" in html and "600 s" in html


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("tables:missing", "module 'tables' has no function 'missing'"),
        ("no_such_module:render", "module 'no_such_module' does not import"),
        ("tables", "write the function as 'package.module:function'"),
        ("tables:nothing", "returned str '', not the table's text"),
    ],
)
def test_a_path_that_gives_no_table_fails_the_build_naming_it(tmp_path: Path, path: str, message: str) -> None:
    result = _build(tmp_path, f"# Arguments\n\n```{{generated-table}} {path}\n```\n")
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
