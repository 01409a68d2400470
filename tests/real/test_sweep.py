"""The orphan sweep against the real control plane: the gang of an ``airflow dags test`` run killed
with SIGKILL (nothing got to clean up) is found by a dry run, which deletes nothing, and removed by
``--delete``; nothing of it is left.

``airflow dags test`` runs in a real subprocess on this session's Airflow database, its
``kubernetes_default`` connection the session's real cluster (inherited from the environment). Its
gang asks for nine members, more than every pool an on-demand gang may use can ever hold
(``scenarios/gpu.yaml``), so it waits on its ProvisioningRequest until it is killed. The sweep is
the module ``airflow gang sweep`` runs (``airflow_provider_gang.sweep.command``), called in-process.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_orphans import DagsTest, objects_of, sweep, wait_for_request
from tests.real.backends import RealBackend, wait_for

pytestmark = pytest.mark.timeout(300)
DAG_ID = "real_orphan"
DAG_FILE = f'''
"""A gang that waits for ever: nine members, more than the real tier's pools can hold."""
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

with DAG(dag_id="{DAG_ID}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    GangTrainingOperator(
        task_id="train", size=9, gpus=1, cpu="1", distributed="torch",
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        pod_template={{"spec": {{"containers": [{{"name": "trainer", "image": "trainer:sim"}}]}}}},
        reservation_timeout=timedelta(minutes=20), deferrable=True,
    )
'''


@pytest.fixture
def killed_run(tmp_path: Path) -> Iterator[DagsTest]:
    """``airflow dags test`` of :data:`DAG_FILE`, killed after the test whatever happened."""
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "real_orphan.py").write_text(textwrap.dedent(DAG_FILE))
    run = DagsTest(folder, tmp_path / "dags-test.log", DAG_ID)
    yield run
    run.kill()


def test_a_gang_left_by_a_killed_run_is_found_and_removed(cluster: RealBackend, killed_run: DagsTest) -> None:
    orphan = wait_for_request(cluster, killed_run, set())
    killed_run.kill()
    left = objects_of(cluster, orphan)
    assert len(left) >= 4, left  # owner, PodTemplate, ProvisioningRequest, headless Service

    status, dry_run = sweep()
    assert status == 0, dry_run
    assert f"default/{orphan}: withdraw - " in dry_run and "`airflow dags test` run whose process is gone" in dry_run
    assert "dry run: nothing deleted" in dry_run
    assert objects_of(cluster, orphan) == left, "a dry run deleted something"

    status, swept = sweep("--delete")
    assert status == 0 and f"default/{orphan}: withdrawn (" in swept, swept
    wait_for(lambda: not objects_of(cluster, orphan), timeout=90, what=f"nothing of {orphan} left")
