"""No module reaches into another one's private names (PEP 8: a leading underscore marks a name as
internal to its module, https://peps.python.org/pep-0008/#descriptive-naming-styles).

Read with :mod:`ast` over every module of the provider, the tests, the benchmarks and the DAGs;
what counts as reaching in, when the other module is one of those roots:

- ``from other import _name`` (relative imports resolved against the importing module's package);
- ``import pkg._module`` or ``from pkg import _module``;
- ``other._name`` where ``other`` is bound to a module by an import in the same file.

Dunder names (``__version__``, ``from __future__ import ...``) are not private. A name that another
module needs is given a public name in its own module, or that module gains a public function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
ROOTS = ("airflow_provider_gang", "tests", "bench", "dags")


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def is_module(dotted: str, repository: Path) -> bool:
    """Whether ``dotted`` names a module or package of the repository."""
    path = repository.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def module_name(path: Path, repository: Path) -> str:
    parts = path.relative_to(repository).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a ``from ... import`` reads from, relative levels resolved (``importlib`` rules)."""
    if not node.level:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def reaches_into(
    source: str, importer: str, *, is_package: bool = False, repository: Path = REPOSITORY
) -> Iterator[str]:
    """Every place ``source`` (the module ``importer``) uses another module's private name."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ROOTS:
                    modules[alias.asname or alias.name] = alias.name
                if any(is_private(part) for part in alias.name.split(".")):
                    yield f"line {node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            origin = absolute(node, importer, is_package)
            if origin.split(".")[0] not in ROOTS:
                continue
            for alias in node.names:
                if is_private(alias.name) and origin != importer:
                    yield f"line {node.lineno}: from {origin} import {alias.name}"
                elif is_module(f"{origin}.{alias.name}", repository):
                    modules[alias.asname or alias.name] = f"{origin}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            bound = ast.unparse(node.value)
            if bound in modules and modules[bound] != importer:
                yield f"line {node.lineno}: {bound}.{node.attr} (of {modules[bound]})"


def test_no_module_uses_another_module_s_private_names() -> None:
    found = {}
    for root in ROOTS:
        for path in sorted((REPOSITORY / root).rglob("*.py")):
            importer = module_name(path, REPOSITORY)
            uses = list(reaches_into(path.read_text(), importer, is_package=path.name == "__init__.py"))
            if uses:
                found[str(path.relative_to(REPOSITORY))] = uses
    assert found == {}, "give the name a public spelling in its module, or add a public function there"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "from airflow_provider_gang.operators.history import _IN_PROCESS",
            ["line 1: from airflow_provider_gang.operators.history import _IN_PROCESS"],
            id="from-import",
        ),
        pytest.param(
            "from .kill import _guard",
            ["line 1: from airflow_provider_gang.triggers.kill import _guard"],
            id="relative",
        ),
        pytest.param(
            "from airflow_provider_gang.triggers import kill as k\nk._guard()",
            ["line 2: k._guard (of airflow_provider_gang.triggers.kill)"],
            id="attribute-of-an-imported-module",
        ),
        pytest.param(
            "import tests._private_helpers",
            ["line 1: import tests._private_helpers"],
            id="private-module",
        ),
        pytest.param(
            "from __future__ import annotations\nfrom airflow.models import _private\nobject()._x",
            [],
            id="dunder-third-party-and-objects-pass",
        ),
        pytest.param("def _own():\n    pass\n_own()", [], id="own-private-names-pass"),
    ],
)
def test_the_check_finds_each_way_of_reaching_in(source: str, expected: list[str]) -> None:
    assert list(reaches_into(source, "airflow_provider_gang.triggers.base")) == expected
