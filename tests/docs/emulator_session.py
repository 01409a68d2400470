"""Run a page's "first DAG on the emulator" commands as the page shows them.

The page (the quick start, the README) shows three commands: ``.venv/bin/gang-sim serve ... &``, the
``export AIRFLOW_CONN_KUBERNETES_DEFAULT=...`` that points Airflow's connection at the kubeconfig it
writes, and ``.venv/bin/airflow dags test <dag>``. :func:`run_first_dag` takes them from the page
(:func:`tests.docs.pages.shown_command`) and runs them with two substitutions only: the kubeconfig
path ``/tmp/gang.kubeconfig`` becomes one in the test's folder, and ``.venv/bin/`` the ``bin`` of the
virtual environment under test (the repository's, or a fresh one with the installed wheels).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.docs.pages import shown_command
from tests.standalone.processes import BIN, start, tail

SHOWN_KUBECONFIG = "/tmp/gang.kubeconfig"
READY_TIMEOUT_SECONDS = 120.0
DAG_TEST_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class FirstDagRun:
    """What ``airflow dags test`` printed and returned, and the pods left in the cluster after it."""

    returncode: int
    output: str
    pods_left: list[str]


def _wait_until_ready(log: Path, server: subprocess.Popen[bytes]) -> None:
    """Until ``gang-sim serve`` prints ``ready:`` (it writes the kubeconfig first)."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while "ready: " not in log.read_text(errors="replace"):
        assert server.poll() is None, f"gang-sim serve exited with {server.returncode}:\n{tail(log.read_text())}"
        assert time.monotonic() < deadline, f"gang-sim serve not ready in {READY_TIMEOUT_SECONDS} s"
        time.sleep(0.2)


def run_first_dag(page: str, dag_id: str, *, work: Path, bin_dir: Path, env: Mapping[str, str]) -> FirstDagRun:
    """Run ``page``'s three commands for ``dag_id`` in ``work``, with ``env`` (the DAGs folder, the
    metadata database) for ``airflow dags test``; the emulator is stopped afterwards."""
    serve = shown_command(page, ".venv/bin/gang-sim serve ")
    export = shown_command(page, "export AIRFLOW_CONN_KUBERNETES_DEFAULT=")
    dags_test = shown_command(page, ".venv/bin/airflow dags test ")
    assert serve.endswith(" &"), f"{page}: the emulator is started in the background: {serve}"
    assert shlex.split(dags_test)[-1] == dag_id, f"{page}: {dags_test} does not test {dag_id}"
    kubeconfig = work / "gang.kubeconfig"

    def here(command: str) -> list[str]:
        local = command.replace(SHOWN_KUBECONFIG, str(kubeconfig)).replace(".venv/bin/", f"{bin_dir}/")
        return shlex.split(local.removesuffix("&"))

    (assignment,) = here(export)[1:]
    name, value = assignment.split("=", 1)
    server = start("gang-sim serve", here(serve), work / "gang-sim.log", env)
    try:
        _wait_until_ready(work / "gang-sim.log", server.process)
        result = subprocess.run(
            here(dags_test),
            capture_output=True,
            text=True,
            env={**env, name: value},
            timeout=DAG_TEST_TIMEOUT_SECONDS,
            check=False,
            cwd=work,
        )
        pods = subprocess.run(
            [str(BIN / "kubectl"), "--kubeconfig", str(kubeconfig), "get", "pods", "-n", "default", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
    finally:
        server.stop()
    return FirstDagRun(result.returncode, result.stdout + result.stderr, pods)


def assert_succeeded(run: FirstDagRun, dag_id: str) -> None:
    """``airflow dags test`` exited 0, its one DAG run finished ``success``, and no pod was left."""
    assert run.returncode == 0, tail(run.output, 80)
    finished = [line for line in run.output.splitlines() if f"DagRun Finished: dag_id={dag_id}," in line]
    assert len(finished) == 1 and "state=success" in finished[0], tail(run.output, 80)
    assert run.pods_left == []  # on_finish="delete": nothing left in the cluster
