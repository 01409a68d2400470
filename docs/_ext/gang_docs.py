"""Sphinx extension of the doc set: ``generated-table``, a table rendered by the provider's own code.

A page writes, in MyST::

    ```{generated-table} airflow_provider_gang.some.module:render_function
    ```

and the directive imports ``render_function``, calls it with no arguments and parses the text it
returns as the markup of the place it stands in: MyST Markdown on a ``.md`` page, reStructuredText
inside an ``{eval-rst}`` block or on an ``.rst`` page (docutils' ``State.nested_parse``; MyST's
directive state parses Markdown, https://myst-parser.readthedocs.io/en/latest/syntax/roles-and-directives.html).
So a table whose facts live in code (the operator's argument record) is generated when the docs are
built, never copied onto a page.

A path that does not import, a missing function, a function that raises or returns something other
than a non-empty ``str`` is a build error naming the path (``make docs`` fails with ``-W``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


class GeneratedTableError(Exception):
    """The directive's function could not give a table; the message names the path and why."""


def rendered_text(path: str) -> str:
    """Import ``module:function`` and return what the function renders, checked to be text."""
    module_name, separator, function_name = path.partition(":")
    if not separator or not module_name or not function_name:
        raise GeneratedTableError(f"{path!r}: write the function as 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise GeneratedTableError(f"{path!r}: module {module_name!r} does not import: {error}") from error
    function: Callable[[], Any] | None = getattr(module, function_name, None)
    if not callable(function):
        raise GeneratedTableError(f"{path!r}: module {module_name!r} has no function {function_name!r}")
    text = function()
    if not isinstance(text, str) or not text.strip():
        raise GeneratedTableError(f"{path!r} returned {type(text).__name__} {text!r:.80}, not the table's text")
    return text


class GeneratedTable(SphinxDirective):
    """``generated-table module:function``: the function's text, parsed in place."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        path = self.arguments[0]
        try:
            text = rendered_text(path)
        except GeneratedTableError as error:
            raise self.error(f"generated-table {error}") from error
        container = nodes.container(classes=["generated-table"])
        self.state.nested_parse(StringList(text.splitlines(), source=path), self.content_offset, container)
        return [container]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("generated-table", GeneratedTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
