"""``docs/architecture.md``: its room tables are read from the source (``docs/_ext/room_graph.py``), and
every module or function its "One try through the rooms" chart names exists."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.pages import DOCS

sys.path.insert(0, str(DOCS / "_ext"))
import room_graph  # the docs' own extension folder, as docs/conf.py puts it on the path

PAGE = DOCS / "architecture.md"
DOTTED = re.compile(r"\b((?:operators|triggers|hooks|kube|reservation|plugin|sweep)(?:\.[A-Za-z_]\w*)+)")


def chart_names() -> list[str]:
    """The dotted names in the right-hand column of the page's one-try chart."""
    chart = PAGE.read_text().split("## One try through the rooms", 1)[1].split("```", 2)[1]
    return sorted({name for line in chart.splitlines() for name in DOTTED.findall(line[50:])})


def resolve(dotted: str) -> object:
    """The module, class or function ``airflow_provider_gang.<dotted>`` names."""
    parts = f"airflow_provider_gang.{dotted}".split(".")
    for split in range(len(parts), 1, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def test_the_chart_names_something() -> None:
    assert len(chart_names()) >= 20


@pytest.mark.parametrize("dotted", chart_names())
def test_every_name_in_the_chart_exists(dotted: str) -> None:
    resolve(dotted)


def test_every_room_is_on_the_page_with_what_it_holds() -> None:
    rooms = room_graph.rooms()
    assert {"sweep/", "plugin/", "decorators/", "member/", "reservation/", "kube/"} <= rooms.keys()
    table = room_graph.markdown_rooms()
    for name, room in rooms.items():
        assert f"| `{name}` | {room.holds} |" in table


def arrows() -> Iterator[tuple[str, str]]:
    for name, room in room_graph.rooms().items():
        yield from ((name, target) for target in room.imports)


def test_every_arrow_points_down_a_floor() -> None:
    floors = room_graph.floors()
    assert all(floors[source] > floors[target] for source, target in arrows())


def test_the_floors_hold_the_layers_the_contracts_name() -> None:
    floors = room_graph.floors()
    order = ["decorators/", "operators/", "triggers/", "hooks/", "kube/", "reservation/"]
    assert [floors[name] for name in order] == sorted((floors[name] for name in order), reverse=True)
    assert ("plugin/", "operators/") not in set(arrows())


def test_a_relative_import_counts_as_an_arrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "airflow_provider_gang"
    for room, source in {
        "top": '"""The top room."""\n',
        "top/inner.py": "from ..bottom import thing\n",
        "bottom": '"""The bottom room."""\nthing = 1\n',
    }.items():
        path = package / (room if room.endswith(".py") else f"{room}/__init__.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    monkeypatch.setattr(room_graph, "PACKAGE_ROOT", package)
    room_graph.rooms.cache_clear()
    try:
        assert room_graph.rooms()["top/"].imports == {"bottom/"}
        assert room_graph.floors() == {"top/": 2, "bottom/": 1}
        assert "| 2 | `top/` | no room |" in room_graph.markdown_floors()
    finally:
        room_graph.rooms.cache_clear()


def test_rooms_importing_each_other_are_an_error_naming_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "airflow_provider_gang"
    for room, other in (("first", "second"), ("second", "first")):
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text(f'"""Room {room}."""\nimport airflow_provider_gang.{other}\n')
    monkeypatch.setattr(room_graph, "PACKAGE_ROOT", package)
    room_graph.rooms.cache_clear()
    try:
        with pytest.raises(ValueError, match="rooms import each other: first/ -> second/ -> first/"):
            room_graph.floors()
    finally:
        room_graph.rooms.cache_clear()
