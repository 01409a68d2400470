"""The provider's rooms and the imports between them, read from the source when the docs are built.

``docs/architecture.md`` renders both tables with the ``generated-table`` directive
(:mod:`gang_docs`), so the page cannot drift from the code:

- :func:`markdown_rooms` - one row a room: what its docstring says it holds, its modules and lines,
  and the rooms it imports;
- :func:`markdown_floors` - the rooms by floor: a room stands above every room it imports, floor 1
  imports no other room.

A *room* is a subpackage of ``airflow_provider_gang`` or one of its top-level modules (the package's
own ``__init__`` is the front door, not a room). An *import* is any ``import`` or ``from ... import``
statement in a room's files, at module level or inside a function or a ``TYPE_CHECKING`` block alike,
with relative imports resolved as Python's import system does
(https://docs.python.org/3/reference/import.html#package-relative-imports). The files are parsed with
:mod:`ast`, never imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

PACKAGE = "airflow_provider_gang"
PACKAGE_ROOT = Path(__file__).resolve().parents[2] / PACKAGE
_ROLE = re.compile(r":\w+:`~?([^`]+)`")
"""A reStructuredText role in a docstring (``:mod:`.gang```), shown on the Markdown page as its target."""


@dataclass
class Room:
    """One room: its name as a reader writes it (``hooks/``, ``links.py``), its files and imports."""

    name: str
    files: list[Path]
    imports: set[str] = field(default_factory=set)

    @property
    def lines(self) -> int:
        return sum(len(path.read_text().splitlines()) for path in self.files)

    @property
    def holds(self) -> str:
        """The first sentence of the room's docstring (the package's ``__init__`` or the module's)."""
        entry = self.files[0]
        docstring = ast.get_docstring(ast.parse(entry.read_text())) or ""
        paragraph = docstring.split("\n\n")[0].replace("\n", " ").strip()
        if not paragraph or paragraph == "Package.":
            raise ValueError(f"{entry}: the room's docstring must say what it holds")
        sentence = paragraph.split(". ")[0].rstrip(".")
        return _ROLE.sub(r"`\1`", sentence.replace("``", "`"))


def _room_of(module: str) -> str | None:
    """The room of a dotted module name inside the package, or ``None`` outside it (or for the root)."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    if (PACKAGE_ROOT / parts[1]).is_dir():
        return f"{parts[1]}/"
    return f"{parts[1]}.py"


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_modules(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, relative imports resolved against its own package."""
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


@cache
def rooms() -> dict[str, Room]:
    """Every room by name, sorted, each with the other rooms it imports."""
    found: dict[str, Room] = {}
    for path in sorted(PACKAGE_ROOT.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            files = [path / "__init__.py", *sorted(p for p in path.rglob("*.py") if p != path / "__init__.py")]
            found[f"{path.name}/"] = Room(f"{path.name}/", files)
        elif path.suffix == ".py" and path.name != "__init__.py":
            found[path.name] = Room(path.name, [path])
    for room in found.values():
        for path in room.files:
            for module in _imported_modules(path):
                target = _room_of(module)
                if target is not None and target != room.name and target in found:
                    room.imports.add(target)
    return found


def floors() -> dict[str, int]:
    """Each room's floor: 1 when it imports no room, else one above the highest room it imports.
    A loop of rooms importing each other has no floor; it is an error naming the rooms."""
    every = rooms()
    floor: dict[str, int] = {}

    def place(name: str, visiting: tuple[str, ...]) -> int:
        if name in visiting:
            raise ValueError("rooms import each other: " + " -> ".join([*visiting, name]))
        if name not in floor:
            below = [place(target, (*visiting, name)) for target in every[name].imports]
            floor[name] = 1 + max(below, default=0)
        return floor[name]

    for name in every:
        place(name, ())
    return floor


def _names(names: set[str]) -> str:
    return ", ".join(f"`{name}`" for name in sorted(names)) or "no other room"


def markdown_rooms() -> str:
    """The rooms table, highest floor first (MyST Markdown)."""
    every, floor = rooms(), floors()
    rows = [
        "| Room | Holds | Modules | Lines | Imports |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for name in sorted(every, key=lambda name: (-floor[name], name)):
        room = every[name]
        rows.append(f"| `{name}` | {room.holds} | {len(room.files)} | {room.lines} | {_names(room.imports)} |")
    return "\n".join(rows)


def markdown_floors() -> str:
    """The rooms by floor, top first, each with who imports it (MyST Markdown)."""
    every, floor = rooms(), floors()
    importers = {name: {other for other, room in every.items() if name in room.imports} for name in every}
    rows = ["| Floor | Room | Imported by |", "| ---: | --- | --- |"]
    for name in sorted(every, key=lambda name: (-floor[name], name)):
        rows.append(f"| {floor[name]} | `{name}` | {_names(importers[name]) if importers[name] else 'no room'} |")
    return "\n".join(rows)
