"""The import graph of the two packages: no import cycle between modules, the emulator's distribution
(``gang-sim/pyproject.toml``) naming exactly the third-party packages ``gang_sim`` imports, and the
provider's naming none that only the emulator needs. The layers are import-linter's contracts
(``pyproject.toml``). A module's size is a review question, not a test: a module is split where its
jobs part.

Import cycles are found on grimp's import graph (the library ``lint-imports`` is built on), counting
imports under ``TYPE_CHECKING`` and inside functions too: a cycle hidden there still ties two modules
together. Strongly connected components are computed with Tarjan's algorithm
(https://en.wikipedia.org/wiki/Tarjan%27s_strongly_connected_components_algorithm).
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest
import tomllib

REPOSITORY = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_gang"
EMULATOR = "gang_sim"
SOURCES = {PACKAGE: REPOSITORY / PACKAGE, EMULATOR: REPOSITORY / "gang-sim" / "src" / EMULATOR}
"""Each top-level package of this repository and its folder."""


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, EMULATOR, include_external_packages=True)


def strongly_connected_components(edges: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the package is deeper than the default recursion limit allows)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = lowlink[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = lowlink[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges.get(successor, ()))))
                    advanced = True
                    break
                if successor in on_stack:
                    lowlink[node] = min(lowlink[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[node])
            if lowlink[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def test_tarjan_finds_a_cycle_and_leaves_a_chain_alone() -> None:
    cyclic = strongly_connected_components({"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": []})
    assert sorted(map(sorted, cyclic)) == [["a", "b", "c"], ["d"]]
    assert all(len(component) == 1 for component in strongly_connected_components({"a": ["b"], "b": ["c"]}))


def _modules_of(graph: grimp.ImportGraph, inside: str) -> set[str]:
    return {module for module in graph.modules if module == inside or module.startswith(inside + ".")}


def _package_modules(graph: grimp.ImportGraph) -> set[str]:
    return _modules_of(graph, PACKAGE) | _modules_of(graph, EMULATOR)


def _is_package(module: str) -> bool:
    top, _, rest = module.partition(".")
    return (SOURCES[top].joinpath(*rest.split(".")) / "__init__.py").is_file()


def test_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    # A package's __init__ re-exporting its children is not a cycle between modules: edges into and out of
    # package roots are left out, so only module-to-module imports are judged.
    modules = {module for module in _package_modules(graph) if not _is_package(module)}
    edges = {
        module: [imported for imported in graph.find_modules_directly_imported_by(module) if imported in modules]
        for module in modules
    }
    cycles = [sorted(component) for component in strongly_connected_components(edges) if len(component) > 1]
    assert cycles == [], f"modules importing each other (directly or around a loop): {cycles}"


# Loaded only by pytest itself (``pytest_plugins``), so pytest is there whenever it is imported; what it
# needs beyond gang-sim's dependencies is gang-sim's "testing" extra.
PYTEST_PLUGIN = f"{EMULATOR}.testing.pytest_plugin"


def _third_party_imports(graph: grimp.ImportGraph, modules: Iterable[str]) -> set[str]:
    imported = set()
    for module in modules:
        imported |= {name.split(".")[0] for name in graph.find_modules_directly_imported_by(module)}
    return {name for name in imported if name not in SOURCES and name not in sys.stdlib_module_names}


def _distribution_names(requirements: Iterable[str]) -> set[str]:
    names = (re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0] for requirement in requirements)
    return {name.lower().replace("_", "-") for name in names}


def _distributions(imports: set[str]) -> set[str]:
    distributions_of = importlib.metadata.packages_distributions()
    return {name.lower().replace("_", "-") for top in imports for name in distributions_of.get(top, [top])}


def test_the_emulator_distribution_names_what_gang_sim_imports(graph: grimp.ImportGraph) -> None:
    project = tomllib.loads((REPOSITORY / "gang-sim" / "pyproject.toml").read_text())["project"]
    required = _distribution_names(project["dependencies"])
    testing = _distribution_names(project["optional-dependencies"]["testing"])
    emulator = _distributions(_third_party_imports(graph, _modules_of(graph, EMULATOR) - {PYTEST_PLUGIN}))
    plugin = _distributions(_third_party_imports(graph, [PYTEST_PLUGIN]))
    assert emulator == required, "gang-sim's dependencies are what gang_sim imports"
    assert plugin - required == testing, "gang-sim's testing extra is what its pytest plugin adds"


def test_the_provider_names_no_emulator_dependency(graph: grimp.ImportGraph) -> None:
    """The provider's own requirements stop at what it imports: an Airflow worker installing it against a
    real cluster gets none of the packages only the emulator imports."""
    provider = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    emulator = tomllib.loads((REPOSITORY / "gang-sim" / "pyproject.toml").read_text())["project"]
    emulator_only = _distribution_names(emulator["dependencies"]) - _distributions(
        _third_party_imports(graph, _modules_of(graph, PACKAGE))
    )
    assert {"jsonschema", "cryptography", "common-expression-language"} <= emulator_only
    assert not emulator_only & _distribution_names(provider["dependencies"])
    assert "sim" not in provider["optional-dependencies"]
