"""``airflow dags test`` of a DAG file a user writes, in a folder of its own, against ``gang-sim serve``.

The cluster is a ``gang-sim serve`` subprocess (:func:`tests.standalone.clusters.start_cluster`) whose
kubeconfig the ``kubernetes_default`` connection reads through ``AIRFLOW_CONN_KUBERNETES_DEFAULT``. The
CLI shares this pytest run's Airflow home and metadata database (migrated by the ``airflow_db``
fixture of ``tests/e2e/conftest.py``; a fresh ``airflow db migrate`` would double a test's time), with
its own DAGs folder and without pytest's ``unit_test_mode``.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.standalone.clusters import ClusterSpec, connection_json, kubectl, start_cluster
from tests.standalone.processes import BIN, tail


@dataclass(frozen=True)
class DagsTest:
    """What ``airflow dags test`` did: its exit code, its output, and the pods left afterwards."""

    returncode: int
    output: str
    pods: list[str]

    def tail(self, lines: int = 80) -> str:
        return tail(self.output, lines)

    def finished_with(self, dag_id: str) -> str:
        """The state the DAG run finished with, from the CLI's ``DagRun Finished`` line."""
        (line,) = [line for line in self.output.splitlines() if f"DagRun Finished: dag_id={dag_id}" in line]
        return line.split("state=")[1].split(",")[0].split()[0]


def dags_test(tmp_path: Path, dag_id: str, dag_file: str, *, scenario: str = "demo") -> DagsTest:
    """Write ``dag_file`` into a DAGs folder under ``tmp_path`` and run ``airflow dags test dag_id``."""
    from airflow import settings

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / f"{dag_id}.py").write_text(textwrap.dedent(dag_file))
    cluster = start_cluster(tmp_path, dag_id.replace("_", "-"), ClusterSpec(scenario, 60.0))
    try:
        env = {
            **{key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"},
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": str(settings.SQL_ALCHEMY_CONN),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": connection_json(cluster),
        }
        result = subprocess.run(
            [str(BIN / "airflow"), "dags", "test", dag_id],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
            check=False,
        )
        pods = kubectl(cluster, "get", "pods", "-n", "default", "-o", "name").split()
    finally:
        cluster.stop()
    return DagsTest(result.returncode, result.stdout + result.stderr, pods)
