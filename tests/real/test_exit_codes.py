"""The exit-code policy on the real control plane: a member's exit code, written by kwok's exit stage
(``sim.gang.dev/exit-code``, :mod:`tests.real.members`), decides whether Airflow runs another try.

Try 1's rank 1 exits 143, listed in ``retry_on_exit_codes``: the try ends ``member_exit_retryable``
and try 2 runs (``RetryAsIs`` is the default answer to a retryable reason). Try 2's rank 0 exits 3,
listed in ``fail_on_exit_codes``: the try ends ``member_exit_fails_for_good`` and the task fails with
a retry left unused. Each time the other member, still running, is deleted with its gang.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.e2e.gang_dags import gang_dag, run_dag_test, task_instance
from tests.real.backends import RealBackend
from tests.real.members import RUNS_UNTIL_DELETED, Exit, member_exits, nothing_left

pytestmark = pytest.mark.timeout(600)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def test_a_retry_on_code_runs_another_try_and_a_fail_on_code_ends_the_task(
    cluster: RealBackend, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_id = "real_exit_codes"
    dag = gang_dag(
        dag_id,
        retries=2,
        size=2,
        gpus=1,
        cpu="1",
        pod_template=RUNS_UNTIL_DELETED,
        provisioning_class=ATOMIC,
        retry_on_exit_codes=[143],
        fail_on_exit_codes=[3],
        deferrable=True,
        reservation_timeout=timedelta(minutes=3),
        startup_timeout=timedelta(minutes=2),
        run_timeout=timedelta(minutes=3),
    )
    with member_exits(cluster, dag_id, [Exit(attempt=1, rank=1, code=143), Exit(attempt=2, rank=0, code=3)]):
        dag_run = run_dag_test(dag)
    ti = task_instance(dag_run)
    assert (ti.state, ti.try_number) == ("failed", 2)  # the fail_on code left try 3 unused
    log = capfd.readouterr().out
    assert "rank 1 exited with 143, listed in retry_on_exit_codes: a new try may succeed" in log
    assert "rank 0 exited with 3, listed in fail_on_exit_codes: no retry can help" in log
    assert "member_exit_retryable" in log and "member_exit_fails_for_good" in log
    nothing_left(cluster, dag_id)
