"""The docs' tables, rendered from the records: the operator's arguments and the ``[gang]`` options.

- :func:`argument_table` renders ``reservation.tries.argument_record.ARGUMENTS`` (one group of
  ``GROUPS``, or all) as a reStructuredText ``list-table`` or a Markdown table: argument, type,
  default, whether Airflow renders it with Jinja, and what it means. A Sphinx directive can parse the
  reStructuredText into a page (``docutils.statemachine.StringList`` + ``nested_parse``).
  :func:`argument_tables` renders every group as a table of its own under the group's title.
- :func:`configuration_table` renders ``reservation.deployment.OPTIONS`` the same way: option, type,
  default, environment variable, meaning.
- :func:`markdown_argument_tables` and :func:`markdown_configuration_table` take no argument: they are
  what the doc set's ``generated-table`` directive (``docs/_ext/gang_docs.py``) calls on its MyST pages.
- :func:`parameter_fields` renders the arguments as reStructuredText ``:param name:`` fields, the
  parameter list of the operator's docstring.

Docs are written in reStructuredText inline markup (````code````); the Markdown form turns it into
backticks and escapes ``|``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

from airflow_provider_gang.reservation import deployment
from airflow_provider_gang.reservation.tries.argument_record import ARGUMENTS, GROUPS, REQUIRED, Argument

STYLES = ("rst", "markdown")


def describe_duration(value: timedelta) -> str:
    """``timedelta(minutes=30)`` as ``30 minutes`` (whole hours, minutes or seconds)."""
    seconds = value.total_seconds()
    for unit, length in (("hour", 3600), ("minute", 60)):
        if seconds >= length and seconds % length == 0:
            count = int(seconds // length)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


def describe_default(argument: Argument) -> str:
    """The default as the docs show it (reStructuredText inline markup)."""
    if argument.default is REQUIRED:
        return "required"
    if argument.default_from:
        shown = "" if argument.default is None else f" (else ``{argument.default!r}``)"
        return f"``{argument.default_from}``{shown}"
    if isinstance(argument.default, timedelta):
        return describe_duration(argument.default)
    return f"``{argument.default!r}``"


def _rows(arguments: Sequence[Argument]) -> list[list[str]]:
    return [
        [
            f"``{argument.name}``",
            f"``{argument.annotation}``",
            describe_default(argument),
            "yes" if argument.templated else "no",
            argument.doc,
        ]
        for argument in arguments
    ]


def _render(header: list[str], rows: list[list[str]], style: str, widths: str) -> str:
    if style == "rst":
        lines = [".. list-table::", "   :header-rows: 1", f"   :widths: {widths}", ""]
        for row in [header, *rows]:
            lines += [f"   {'*' if index == 0 else ' '} - {cell}" for index, cell in enumerate(row)]
        return "\n".join(lines) + "\n"
    if style == "markdown":

        def cell(text: str) -> str:
            return text.replace("``", "`").replace("|", "\\|")

        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell(text) for text in row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown table style {style!r}; use one of {', '.join(STYLES)}")


def _arguments(arguments: Sequence[Argument], style: str) -> str:
    header = ["Argument", "Type", "Default", "Templated", "Meaning"]
    return _render(header, _rows(arguments), style, "18 20 16 8 38")


def argument_table(style: str = "rst", group: str | None = None) -> str:
    """The operator's arguments (those of ``group``, a key of ``GROUPS``; ``None``: all) as a table."""
    if group is not None and group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; use one of {', '.join(GROUPS)}")
    return _arguments([argument for argument in ARGUMENTS if group is None or argument.group == group], style)


def argument_tables(style: str = "rst", *, without: Collection[str] = ()) -> str:
    """Every group's arguments, less those named in ``without``, as a table under the group's title
    (strong emphasis, the same markup in both styles: a heading cannot stand inside a directive)."""
    unknown = sorted(set(without) - {argument.name for argument in ARGUMENTS})
    if unknown:
        raise ValueError(f"no such argument(s) to leave out: {', '.join(unknown)}")
    parts = []
    for group, title in GROUPS.items():
        chosen = [argument for argument in ARGUMENTS if argument.group == group and argument.name not in without]
        if chosen:
            parts.append(f"**{title}**\n\n{_arguments(chosen, style)}")
    return "\n".join(parts)


def markdown_argument_tables() -> str:
    """``GangTrainingOperator``'s arguments, group by group, in Markdown (``docs/operators/index.md``)."""
    return argument_tables("markdown")


def configuration_table(style: str = "rst") -> str:
    """The ``[gang]`` options of Airflow's configuration as a table."""
    rows = [
        [
            f"``{option.name}``",
            option.kind,
            f"``{option.default}``",
            f"``AIRFLOW__{deployment.SECTION.upper()}__{option.name.upper()}``",
            option.description,
        ]
        for option in deployment.OPTIONS
    ]
    header = ["Option", "Type", "Default", "Environment variable", "Meaning"]
    return _render(header, rows, style, "20 8 10 27 35")


def markdown_configuration_table() -> str:
    """The ``[gang]`` options in Markdown (``docs/installation.md``)."""
    return configuration_table("markdown")


def parameter_fields() -> str:
    """Every argument as a ``:param name: meaning (default ...)`` field, grouped as the docs are."""
    lines: list[str] = []
    for group, title in GROUPS.items():
        lines += ["", f"{title}:", ""]
        for argument in (item for item in ARGUMENTS if item.group == group):
            templated = ", templated" if argument.templated else ""
            default: Any = describe_default(argument)
            lines.append(f":param {argument.name}: {argument.doc} (default: {default}{templated})")
    return "\n".join(lines) + "\n"
