"""What a first user's containers do on the emulator, seen through its HTTP API.

- ``python:*`` images (every shipped scenario lists that glob) run their command as a local process,
  ``python`` being the local interpreter, and their output is the pod log;
- a container the emulator only simulates, without ``sim.gang.dev/run-seconds``, gets one
  ``Warning`` Event ``RunsUntilDeleted`` saying how to change that;
- ``gang-sim serve --local-images GLOB,...`` adds globs for a run; a bad glob is a usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from gang_sim.cli import build_parser, main, scenario_of
from gang_sim.controllers.kubelet.simulated_runtime import RUN_SECONDS, RUNS_UNTIL_DELETED
from gang_sim.testing.eventually import eventually
from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.scenario import (
    Scenario,
    ScenarioError,
    load_scenario,
    named_scenarios,
    parse_scenario,
)
from tests.builders import pod


def _pod(name: str, image: str, command: list[str] | None = None, annotations: dict[str, str] | None = None) -> Any:
    container: dict[str, Any] = {"name": "main", "image": image, "resources": {"requests": {"cpu": "100m"}}}
    if command is not None:
        container["command"] = command
    return pod(name, spec={"restartPolicy": "Never", "containers": [container]}, annotations=annotations or {})


def _phase(core: client.CoreV1Api, name: str) -> str:
    return str(core.read_namespaced_pod(name, "default").status.phase)


def _log(core: client.CoreV1Api, name: str) -> str:
    response = core.read_namespaced_pod_log(name, "default", _preload_content=False)
    return str(response.data.decode())


def _events(core: client.CoreV1Api, pod: str) -> list[Any]:
    return [item for item in core.list_namespaced_event("default").items if item.involved_object.name == pod]


def test_a_python_image_runs_its_command_on_the_local_interpreter_in_every_shipped_scenario() -> None:
    assert set(named_scenarios()) == {"demo", "small", "seed-cost", "kueue", "dws", "reserved", "topology"}
    for name in named_scenarios():
        assert "python:*" in load_scenario(name).local_process_images, name


def test_python_slim_pod_runs_as_a_local_process_and_an_unannotated_simulated_pod_gets_one_warning(
    sim_cluster: Callable[[Scenario], SimCluster],
) -> None:
    sim = sim_cluster(load_scenario("small"))
    core = sim.core
    code = "import os, sys; print('rank', os.environ['RANK']); print(sys.version_info[0])"
    trainer = _pod("trainer", "python:3.11-slim", ["python", "-c", code])
    trainer["spec"]["containers"][0]["env"] = [{"name": "RANK", "value": "0"}]
    core.create_namespaced_pod("default", trainer)
    core.create_namespaced_pod("default", _pod("forever", "ghcr.io/example/trainer:1"))
    core.create_namespaced_pod("default", _pod("timed", "ghcr.io/example/trainer:1", annotations={RUN_SECONDS: "5"}))

    eventually(
        lambda: _phase(core, "trainer") == "Succeeded",
        timeout=20.0,
        what="the python:3.11-slim pod to succeed",
        interval=0.1,
    )
    sim.advance(10)  # simulated seconds: past the start (start-seconds, default 2) and "timed"'s run-seconds 5
    assert _log(core, "trainer") == "rank 0\n3\n"
    warnings = eventually(
        lambda: [item for item in _events(core, "forever") if item.reason == RUNS_UNTIL_DELETED],
        timeout=20.0,
        what="the RunsUntilDeleted event",
        interval=0.1,
    )
    (warning,) = warnings
    assert warning.type == "Warning"
    assert "ghcr.io/example/trainer:1" in warning.message and "runs until deleted" in warning.message
    assert RUN_SECONDS in warning.message and "--local-images" in warning.message
    assert [item.reason for item in _events(core, "timed") if item.reason == RUNS_UNTIL_DELETED] == []
    assert [item.reason for item in _events(core, "trainer") if item.reason == RUNS_UNTIL_DELETED] == []
    assert _phase(core, "forever") == "Running"
    sim.advance(10)
    assert (_phase(core, "forever"), _phase(core, "timed")) == ("Running", "Succeeded")


@pytest.mark.parametrize(
    ("image", "patterns", "local"),
    [
        pytest.param("python:3.11-slim", ["python:*"], True, id="star"),
        pytest.param("python:3.12", ["python:3.1?"], True, id="question-mark"),
        pytest.param("python:3.9", ["python:3.[01]*"], False, id="character-set-miss"),
        pytest.param("docker.io/library/python:3.11", ["python:*"], False, id="registry-prefix-is-another-image"),
        pytest.param("Python:3.11", ["python:*"], False, id="case-sensitive"),
        pytest.param("python:3.11", ["python:3.11"], True, id="exact"),
    ],
)
def test_local_process_images_are_fnmatch_globs(
    sim_cluster: Callable[[Scenario], SimCluster], image: str, patterns: list[str], local: bool
) -> None:
    scenario = parse_scenario(
        {
            "nodePools": [{"name": "cpu", "zone": "z", "minNodes": 1, "maxNodes": 1}],
            "localProcessImages": patterns,
        }
    )
    sim = sim_cluster(scenario)
    core = sim.core
    core.create_namespaced_pod("default", _pod("p", image, [sys.executable, "-c", "print('local')"]))
    if local:
        eventually(
            lambda: _phase(core, "p") == "Succeeded", timeout=20.0, what="the local process to succeed", interval=0.1
        )
        assert _log(core, "p") == "local\n"
    else:
        sim.advance(5)
        assert _phase(core, "p") == "Running"
        assert [item.reason for item in _events(core, "p")].count(RUNS_UNTIL_DELETED) == 1


@pytest.mark.parametrize("pattern", ["", "python:[3", "python :*", 7])
def test_a_bad_glob_in_a_scenario_names_the_field(pattern: object) -> None:
    document = {"nodePools": [{"name": "cpu", "zone": "z"}], "localProcessImages": ["busybox", pattern]}
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document)
    assert raised.value.field == "localProcessImages[1]"


def test_local_images_flag_adds_globs_to_the_scenario_and_they_run(
    sim_cluster: Callable[[Scenario], SimCluster],
) -> None:
    arguments = ["serve", "--kubeconfig-out", "k", "--scenario", "small", "--local-images", "busybox*,ghcr.io/me/*"]
    scenario = scenario_of(build_parser().parse_args(arguments))
    assert scenario is not None
    assert scenario.local_process_images == ("python:*", "busybox*", "ghcr.io/me/*")
    sim = sim_cluster(scenario)
    core = sim.core
    core.create_namespaced_pod("default", _pod("shell", "busybox:1.36", ["sh", "-c", "echo from-busybox"]))
    eventually(
        lambda: _phase(core, "shell") == "Succeeded",
        timeout=20.0,
        what="the busybox pod to run as a local process",
        interval=0.1,
    )
    assert _log(core, "shell") == "from-busybox\n"


def test_local_images_flag_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0 and "--local-images GLOB,..." in capsys.readouterr().out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(["--scenario", "small", "--local-images", ""], "expected comma-separated image globs", id="empty"),
        pytest.param(["--scenario", "small", "--local-images", "python:*,"], "expected comma-separated", id="trailing"),
        pytest.param(["--scenario", "small", "--local-images", "python:[3"], "unclosed '['", id="bad-glob"),
        pytest.param(["--local-images", "python:*"], "--local-images needs --scenario", id="no-scenario"),
    ],
)
def test_bad_local_images_value_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    """``gang-sim`` exits 2 (argparse's usage error) naming the problem; nothing is served."""
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--kubeconfig-out", "unused", *arguments])
    error = capsys.readouterr().err
    assert exited.value.code == 2 and message in error, error
