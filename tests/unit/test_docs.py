"""``docs/emulator.md`` and ``docs/kueue-and-dws.md`` say what the code does: their snippets are run.

- every YAML block of ``emulator.md`` holding ``nodePools`` loads with the real scenario loader;
- every YAML block of ``kueue-and-dws.md`` is created, document by document, in a Store serving the
  bundled CRDs with Strict field validation (what ``kubectl apply`` against the emulator would do),
  and the GKE manifests are the shipped ``kueue`` / ``dws`` scenarios' objects;
- every ``gang-sim`` command line parses with the real CLI parser (a scenario file it names is the
  page's complete example);
- every Python block builds its operators inside a DAG (the operator checks its arguments then);
- every ``sim.gang.dev/`` annotation named exists, and every one the runtime reads is documented.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang_sim.apiserver.crds import install_bundled_crds
from gang_sim.apiserver.store import Store
from gang_sim.cli import build_parser
from gang_sim.controllers.kubelet.simulated_runtime import ANNOTATIONS, RUNS_UNTIL_DELETED
from gang_sim.world.scenario import load_scenario, named_scenarios, parse_scenario
from gang_sim.world.scenario_objects import create_objects
from tests.docs.pages import name_of, shown_commands

DOCS = Path(__file__).resolve().parents[2] / "docs"
EMULATOR = DOCS / "emulator.md"
KUEUE_AND_DWS = DOCS / "kueue-and-dws.md"


def blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), flags=re.M | re.S)


def scenario_blocks() -> list[str]:
    return [block for block in blocks(EMULATOR, "yaml") if "nodePools:" in block]


def test_the_scenario_examples_load_with_the_real_loader() -> None:
    (example,) = scenario_blocks()
    scenario = parse_scenario(yaml.safe_load(example))
    assert scenario.local_process_images == ("python:*", "ghcr.io/example/*")
    assert [item["kind"] for item in scenario.objects] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert {event.type for event in scenario.events} == {"zoneSaturated", "quotaChange", "nodePoolDeleted"}


def test_the_field_tables_name_every_field_of_the_example() -> None:
    document = yaml.safe_load(scenario_blocks()[0])
    text = EMULATOR.read_text()
    section = text[text.index("## The scenario file, field by field") :]
    for key in document:
        assert f"`{key}" in section.split("```", 2)[2], key
    for key in document["nodePools"][1]:
        assert f"`{key}`" in section, key
    for group in ("autoscaler", "kueue"):
        for key in document[group]:
            assert f"`{key}`" in section, f"{group}.{key}"


@pytest.mark.parametrize("index", range(len(blocks(KUEUE_AND_DWS, "yaml"))))
def test_every_manifest_is_accepted_by_the_emulators_crds(index: int) -> None:
    store = Store()
    install_bundled_crds(store)
    documents = [item for item in yaml.safe_load_all(blocks(KUEUE_AND_DWS, "yaml")[index]) if item]
    assert documents
    created = create_objects(store, documents, path=f"kueue-and-dws.md yaml block {index}")
    assert [item["kind"] for item in created] == [item["kind"] for item in documents]


def _kueue_manifests() -> list[list[dict[str, Any]]]:
    return [[item for item in yaml.safe_load_all(block) if item] for block in blocks(KUEUE_AND_DWS, "yaml")]


def test_the_gke_manifests_are_what_the_kueue_and_dws_scenarios_create() -> None:
    manifests = _kueue_manifests()
    assert [dict(item) for item in load_scenario("kueue").objects] in manifests
    assert [dict(item) for item in load_scenario("dws").objects] in manifests


def test_every_gang_sim_command_line_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my-cluster.yaml").write_text(scenario_blocks()[0])
    monkeypatch.chdir(tmp_path)
    pages = {name_of(EMULATOR), name_of(KUEUE_AND_DWS)}
    lines = [
        command.text for command in shown_commands() if command.page in pages and command.text.startswith("gang-sim ")
    ]
    assert len(lines) >= 5
    for line in lines:
        args = build_parser().parse_args(shlex.split(line)[1:])
        assert args.command in ("serve", "scenarios"), line
        if args.command == "serve" and "--scenario" in line:
            assert args.scenario is not None, line


def test_the_shipped_scenarios_named_are_the_shipped_ones() -> None:
    text = EMULATOR.read_text()
    section = text[text.index("Shipped scenarios") : text.index("## What a container does")]
    named = {name for name in re.findall(r"`([a-z-]+)` \(", section)}
    assert named == set(named_scenarios())


@pytest.mark.parametrize("path", [EMULATOR, KUEUE_AND_DWS], ids=lambda path: path.name)
def test_every_python_block_builds_its_operators_in_a_dag(path: Path) -> None:
    import pendulum
    from airflow.sdk import DAG

    from airflow_provider_gang.operators import GangTrainingOperator
    from airflow_provider_gang.reservation import fallback, ladder_format

    snippets = blocks(path, "python")
    assert snippets
    for index, code in enumerate(snippets):
        namespace = {
            "GangTrainingOperator": GangTrainingOperator,
            **{name: getattr(fallback, name) for name in ladder_format.STEP_TYPES},
        }
        with DAG(dag_id=f"docs_{path.stem}_{index}", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
            exec(compile(code, f"{path.name} python block {index}", "exec"), namespace)
        assert [task.task_type for task in dag.tasks] == ["GangTrainingOperator"], code


def test_every_annotation_named_exists_and_every_one_read_is_documented() -> None:
    named = set()
    for path in (EMULATOR, KUEUE_AND_DWS):
        named |= set(re.findall(r"sim\.gang\.dev/[a-z-]+", path.read_text()))
    assert named == set(ANNOTATIONS)
    assert f"reason `{RUNS_UNTIL_DELETED}`" in EMULATOR.read_text()
