"""The doc set's sources as the tests read them: the pages of ``docs/`` and the README.

A shell command shown on a page is a line of a ``console`` block that starts with ``$ ``; a line ending
in ``\\`` goes on on the next line, and every other line of the block is the output shown. A test that
runs a shown command takes it from here (:func:`shown_command`), so what it runs is what the page says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
DOCS = REPOSITORY / "docs"
README = REPOSITORY / "README.md"

SHELL_LANGUAGES = ("bash", "sh", "shell", "zsh", "shell-session", "console")
"""Fenced-block languages of shell text; on a page only ``console`` is allowed (with ``$`` prompts)."""

_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def sources() -> list[Path]:
    """Every page of the doc set (``docs/**/*.md``), then the README."""
    return [*sorted(DOCS.rglob("*.md")), README]


def name_of(path: Path) -> str:
    """A page's name as tests write it: its path from the repository (``docs/quickstart.md``)."""
    return path.relative_to(REPOSITORY).as_posix()


@dataclass(frozen=True)
class Block:
    """One fenced block: its language (the info string's first word), its text and first line."""

    page: str
    language: str
    text: str
    line: int


def blocks(path: Path, language: str | None = None) -> list[Block]:
    """The fenced blocks of ``path`` (of ``language`` only, if given), indentation of list items removed."""
    text = path.read_text()
    found = []
    for match in _FENCE.finditer(text):
        indent = len(match["indent"])
        body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        words = match["info"].split()
        block = Block(name_of(path), words[0] if words else "", body, text.count("\n", 0, match.start()) + 1)
        if language is None or block.language == language:
            found.append(block)
    return found


@dataclass(frozen=True)
class Command:
    """A shell command shown on a page: its text without the prompt (continuation lines joined)."""

    page: str
    text: str
    line: int

    def without_comment(self) -> str:
        """The command without a trailing comment: a ``#`` after a blank, outside quotes, to the line's end."""
        kept, quote = [], ""
        for index, character in enumerate(self.text):
            if quote:
                quote = "" if character == quote else quote
            elif character in "'\"":
                quote = character
            elif character == "#" and (index == 0 or self.text[index - 1].isspace()):
                end = self.text.find("\n", index)
                return ("".join(kept) + (self.text[end:] if end >= 0 else "")).strip()
            kept.append(character)
        return self.text.strip()


def commands_of(block: Block) -> list[Command]:
    """The ``$ `` lines of a console block, each with its continuation lines."""
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    for offset, line in enumerate(block.text.splitlines()):
        if pending:
            pending.append(line)
        elif line.startswith("$ "):
            pending, start = [line[2:]], block.line + 1 + offset
        if pending and not pending[-1].endswith("\\"):
            found.append(Command(block.page, "\n".join(pending), start))
            pending = []
    assert not pending, f"{block.page}:{start}: the command's last line ends with a backslash"
    return found


@cache
def shown_commands() -> tuple[Command, ...]:
    """Every shell command shown on every page and in the README, in page order."""
    return tuple(command for path in sources() for block in blocks(path, "console") for command in commands_of(block))


def shown_command(page: str, start: str) -> str:
    """The one command on ``page`` (``docs/quickstart.md``, ``README.md``) that starts with ``start``,
    comment removed; an error if there is none or more than one."""
    found = [
        command.without_comment()
        for command in shown_commands()
        if command.page == page and command.text.startswith(start)
    ]
    assert len(found) == 1, f"{page}: {len(found)} commands start with {start!r}: {found}"
    return found[0]
