"""Every shell command the docs show is run: here, or by the test or make target named for it.

The commands are the ``$`` lines of the pages' ``console`` blocks (:mod:`tests.docs.pages`). Each one
must match exactly one row of :data:`HOW`, and each row at least one command, so a new command on a
page fails this test until someone says how it is run:

- :class:`Run`: this test runs it, page by page in the order shown, in a folder of its own where
  ``.venv``, ``bench`` and ``deploy`` are the repository's and ``my-cluster.yaml`` is the emulator
  page's complete scenario example. ``gang-sim serve`` is started and must print ``ready:`` (it is
  stopped when the next one starts or the page ends); the commands after it on the page talk to it
  (the kubeconfig paths shown, ``/tmp/gang-kubeconfig`` and ``/tmp/gang.kubeconfig``, become this
  folder's ``kubeconfig``; a page without its own ``serve`` gets ``gang-sim serve --scenario demo``).
  Every other command runs with ``bash`` and must exit 0; an ``export`` must point the connection at
  that kubeconfig.
- :class:`RunBy`: a test or the Makefile runs it; the file must hold the evidence (a test's call of
  :func:`tests.docs.pages.shown_command` for that command, the Makefile line that makes ``make test``
  run the target).
- :class:`NotRun`: cannot run on this machine; the reason says why.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.pages import DOCS, REPOSITORY, Command, blocks, shown_commands
from tests.standalone.processes import BIN, Started, start, tail

SHOWN_KUBECONFIGS = ("/tmp/gang-kubeconfig", "/tmp/gang.kubeconfig", "/path/to/kubeconfig")
PLACEHOLDERS = {"<gang>": "docs-gang", "<namespace>": "default"}
LINKED = (".venv", "bench", "deploy")
COMMAND_TIMEOUT_SECONDS = 90


@dataclass(frozen=True)
class Run:
    """This test runs the command. ``setup``: kubectl arguments run against the emulator first;
    ``scenario``: the emulator to run it against, started for it; ``node``: a node name the page shows,
    replaced by the name of the emulator's first node."""

    setup: tuple[tuple[str, ...], ...] = ()
    scenario: str | None = None
    node: str | None = None


@dataclass(frozen=True)
class RunBy:
    """``file`` (from the repository) runs the command; ``evidence`` is text that file holds."""

    file: str
    evidence: str


@dataclass(frozen=True)
class NotRun:
    """Not run on this machine, for ``reason``."""

    reason: str


PROVISIONING_REQUEST = {
    "apiVersion": "autoscaling.x-k8s.io/v1",
    "kind": "ProvisioningRequest",
    "metadata": {"name": "docs-gang", "namespace": "default"},
    "spec": {
        "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "podSets": [{"podTemplateRef": {"name": "docs-gang"}, "count": 1}],
    },
}

FIRST_DAG_TEST = "tests/e2e/test_first_dag.py"
RELEASE_TEST = "tests/release/test_installed_wheels.py"

LANE_WITH_DOCS = "test-lane-artifacts:\n\t$(MAKE) --no-print-directory docs\n\t$(MAKE) --no-print-directory release\n"
"""The Makefile lane that runs ``make docs`` and ``make release``."""

HOW: list[tuple[str, str, Run | RunBy | NotRun]] = [
    # The set-up commands.
    (r"README\.md|docs/quickstart\.md|docs/development\.md", r"make test", RunBy(".ci/run", "\nmake test\n")),
    (r"README\.md|docs/quickstart\.md", r"make demo", RunBy("tests/release/test_front_door.py", "shown_command(")),
    (r"docs/development\.md", r"make docs", RunBy("Makefile", LANE_WITH_DOCS)),
    (r"docs/development\.md", r"make release", RunBy("Makefile", LANE_WITH_DOCS)),
    # The first DAG on the emulator, as the quick start and the README show it.
    (
        r"README\.md|docs/quickstart\.md",
        r"\.venv/bin/gang-sim serve --scenario demo .* &",
        RunBy(FIRST_DAG_TEST, "run_first_dag("),
    ),
    (
        r"README\.md|docs/quickstart\.md",
        r"export AIRFLOW_CONN_KUBERNETES_DEFAULT=.*",
        RunBy(FIRST_DAG_TEST, "run_first_dag("),
    ),
    (r"README\.md|docs/quickstart\.md", r"\.venv/bin/airflow dags test \w+", RunBy(FIRST_DAG_TEST, "run_first_dag(")),
    # The release artifacts.
    (
        r"README\.md|docs/installation\.md",
        r"python -m build --outdir dist (\.|gang-sim)",
        RunBy(RELEASE_TEST, "shown_command("),
    ),
    (r"README\.md|docs/installation\.md", r"pip install dist/\S+\.whl", RunBy(RELEASE_TEST, "shown_command(")),
    # The emulator and what the pages do with it.
    (r"docs/emulator\.md|docs/control-planes\.md", r"(\.venv/bin/)?gang-sim scenarios", Run()),
    (r"docs/emulator\.md|docs/kueue-and-dws\.md|docs/control-planes\.md", r"(\.venv/bin/)?gang-sim serve .*", Run()),
    (r"docs/emulator\.md", r"export AIRFLOW_CONN_KUBERNETES_DEFAULT=.*", Run()),
    (
        r"docs/emulator\.md|docs/control-planes\.md",
        r"(KUBECONFIG=/tmp/gang\S+ )?(\.venv/bin/)?kubectl (.* )?get .*",
        Run(),
    ),
    (
        r"docs/emulator\.md",
        r"kubectl .* create --raw /_sim/preemptions .*",
        Run(scenario="reserved", node="gke-sim-l4-spot-b2c4"),
    ),
    (
        r"docs/operators/index\.md",
        r"kubectl get provisioningrequest <gang> .*",
        Run(setup=(("apply", "-f", "-", json.dumps(PROVISIONING_REQUEST)),)),
    ),
    (r"docs/operators/index\.md", r"kubectl get workloads .*", Run()),
    (r"docs/deploying\.md", r"kubectl create namespace gangs", Run()),
    (
        r"docs/deploying\.md",
        r"sed .* deploy/rbac\.yaml \\\n\s*\| kubectl apply .*",
        NotRun(
            "the emulator serves no rbac.authorization.k8s.io API (tests/e2e/test_rbac.py runs every mode under"
            " exactly deploy/rbac.yaml's rules, read from the file, as the emulator's token rules)"
        ),
    ),
    (r"docs/deploying\.md", r"kubectl -n airflow create secret .*", Run(setup=(("create", "namespace", "airflow"),))),
    (r"docs/deploying\.md|docs/benchmarks\.md", r"\.venv/bin/python -m bench\.\w+ --help", Run()),
    # Leftovers: the sweep against the emulator, from the Airflow CLI too.
    (r"docs/cleanup\.md", r"python -m airflow_provider_gang\.sweep( --delete)?", Run()),
    (r"docs/cleanup\.md", r"airflow gang sweep .*", Run()),
    # The contract suite and the real control plane.
    (
        r"docs/fidelity\.md",
        r"\.venv/bin/python -m pytest -q -p no:cacheprovider tests/contract",
        RunBy("Makefile", "--ignore=tests/production --ignore=tests/release -n 2"),
    ),
    (
        r"docs/fidelity\.md",
        r"GANG_CONTRACT_BACKEND=real \.venv/bin/python -m pytest -q -p no:cacheprovider tests/contract",
        RunBy("Makefile", "GANG_CONTRACT_BACKEND=real $(BIN)/python -m pytest -q -p no:cacheprovider tests/contract"),
    ),
    (
        r"docs/control-planes\.md",
        r"make real-cluster",
        NotRun("builds the real control plane: about 20 minutes and 11 GB, once per machine (.ci/run builds it)"),
    ),
    (
        r"docs/control-planes\.md",
        r"src=.*|git clone .*|git -C .*|cp -r /tmp/autoscaler/.*",
        NotRun("fetches the cluster-autoscaler's source from GitHub, which this machine cannot reach"),
    ),
    (
        r"docs/control-planes\.md",
        r"\.venv/bin/gang-sim real .*|KUBECONFIG=/tmp/real\.kubeconfig .*",
        NotRun("needs the real control plane that make real-cluster builds (tests/real start it through RealCluster)"),
    ),
    (
        r"docs/kueue-and-dws\.md",
        r"gcloud container node-pools create .*",
        NotRun("creates a GKE node pool: needs Google Cloud, which this machine cannot reach"),
    ),
]


def how_run(command: Command) -> Run | RunBy | NotRun:
    """The one row of :data:`HOW` for ``command``."""
    rows = [
        how
        for page, pattern, how in HOW
        if re.fullmatch(page, command.page) and re.fullmatch(pattern, command.without_comment(), re.S)
    ]
    assert len(rows) == 1, f"{command.page}:{command.line}: {len(rows)} rows of HOW match {command.text!r}"
    return rows[0]


def test_every_shell_block_is_a_console_block_with_prompts() -> None:
    from tests.docs.pages import SHELL_LANGUAGES, sources

    for path in sources():
        for block in blocks(path):
            if block.language in SHELL_LANGUAGES:
                assert block.language == "console", f"{block.page}:{block.line}: write it as console with $ prompts"
                assert block.text.startswith("$ "), f"{block.page}:{block.line}: a console block starts with $"


def test_every_command_has_one_way_to_run_and_every_way_a_command() -> None:
    commands = shown_commands()
    assert len(commands) > 40
    used = {id(how_run(command)) for command in commands}
    assert [pattern for _, pattern, how in HOW if id(how) not in used] == []


@pytest.mark.parametrize(
    "how", sorted({how for _, _, how in HOW if isinstance(how, RunBy)}, key=repr), ids=lambda how: how.file
)
def test_what_runs_a_command_elsewhere_holds_the_evidence(how: RunBy) -> None:
    assert how.evidence in (REPOSITORY / how.file).read_text(), f"{how.file} does not hold {how.evidence!r}"


class Workspace:
    """The folder the commands run in, and the emulator the page's latest ``gang-sim serve`` started."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.kubeconfig = folder / "kubeconfig"
        self.server: Started | None = None
        self.scenario = ""
        for name in LINKED:
            (folder / name).symlink_to(REPOSITORY / name)
        (example,) = [block.text for block in blocks(DOCS / "emulator.md", "yaml") if "nodePools:" in block.text]
        (folder / "my-cluster.yaml").write_text(example)
        from airflow import settings

        self.environment = {
            **{key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"},
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": str(settings.SQL_ALCHEMY_CONN),
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "KUBECONFIG": str(self.kubeconfig),
            "AIRFLOW_CONN_GKE_A": self.connection(),
            "AIRFLOW_CONN_GKE_B": self.connection(),
        }

    def connection(self) -> str:
        return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(self.kubeconfig)}})

    def here(self, text: str) -> str:
        """The command as it runs here: the kubeconfig paths and placeholders replaced."""
        for shown in SHOWN_KUBECONFIGS:
            text = text.replace(shown, str(self.kubeconfig))
        for placeholder, value in PLACEHOLDERS.items():
            text = text.replace(placeholder, value)
        return text

    def serve(self, command: str) -> None:
        """Start ``command`` (a ``gang-sim serve``) in place of the current emulator; wait for ``ready:``."""
        self.stop()
        self.kubeconfig.unlink(missing_ok=True)
        log = self.folder / "gang-sim.log"
        self.server = start("gang-sim serve", shlex.split(self.here(command)), log, self.environment)
        self.scenario = command
        _wait_for_ready(self.server)

    def ensure_server(self) -> None:
        if self.server is None:
            self.serve(f"gang-sim serve --scenario demo --kubeconfig-out {self.kubeconfig}")

    def first_node(self) -> str:
        return self.bash("kubectl get nodes -o jsonpath='{.items[0].metadata.name}'").strip()

    def kubectl(self, *arguments: str) -> None:
        stdin = arguments[-1] if arguments[:3] == ("apply", "-f", "-") else None
        arguments = arguments[:3] if stdin is not None else arguments
        result = subprocess.run(
            [str(BIN / "kubectl"), *arguments], env=self.environment, input=stdin, capture_output=True, text=True
        )
        assert result.returncode == 0, f"kubectl {' '.join(arguments)}: {result.stderr}"

    def bash(self, command: str) -> str:
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", self.here(command)],
            cwd=self.folder,
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0, f"{command}\nexit {result.returncode}:\n{tail(result.stdout + result.stderr)}"
        return result.stdout

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def _wait_for_ready(server: Started) -> None:
    import time

    deadline = time.monotonic() + 60
    while "ready: " not in server.log():
        assert server.running(), server.describe()
        assert time.monotonic() < deadline, server.describe()
        time.sleep(0.2)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.chdir(tmp_path)  # gang-sim serve's working folder, where the page's scenario file is
    space = Workspace(tmp_path)
    try:
        yield space
    finally:
        space.stop()


def run_here(space: Workspace, command: Command, how: Run) -> None:
    text = command.without_comment()
    if re.match(r"(\.venv/bin/)?gang-sim serve ", text):
        space.serve(text)
        return
    if how.scenario is not None and how.scenario not in space.scenario:
        space.serve(f"gang-sim serve --scenario {how.scenario} --kubeconfig-out {space.kubeconfig}")
    if "kubectl" in text or "sweep" in text:
        space.ensure_server()
    if how.node is not None:
        text = text.replace(how.node, space.first_node())
    for arguments in how.setup:
        space.kubectl(*arguments)
    if text.startswith("export "):
        name = text.split()[1].split("=", 1)[0]
        value = json.loads(space.bash(f'{text}; printf %s "${name}"'))
        assert value["extra"]["kube_config_path"] == str(space.kubeconfig), f"{command.page}: {text}"
        return
    space.bash(text)


def _run_here(command: Command) -> bool:
    ways = [
        how
        for page, pattern, how in HOW
        if re.fullmatch(page, command.page) and re.fullmatch(pattern, command.without_comment(), re.S)
    ]
    return any(isinstance(how, Run) for how in ways)


PAGES_RUN_HERE = sorted({command.page for command in shown_commands() if _run_here(command)})


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", PAGES_RUN_HERE)
def test_the_commands_of_the_page_run(page: str, workspace: Workspace) -> None:
    if page == "docs/cleanup.md":  # the sweep reads Airflow's metadata database
        from airflow.utils import db

        db.initdb()
    ran = 0
    for command in shown_commands():
        how = how_run(command)
        if command.page == page and isinstance(how, Run):
            run_here(workspace, command, how)
            ran += 1
    assert ran > 0
