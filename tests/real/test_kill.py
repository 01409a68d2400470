"""A kill while the gang waits for its reservation and while it runs, on the real control plane: the
trigger's ``on_kill`` (a deferred task marked failed: the triggerer calls it) and the operator's (a
blocking task killed on its worker) each leave nothing of the gang.

The task is driven by hand, as a worker and a triggerer would run it (:mod:`tests.e2e.driving`):
a kill lands between two of its steps, which ``dag.test()`` gives no way to reach. A gang that waits
asks for nine members, more than every pool an on-demand gang may use can ever hold, so its
ProvisioningRequest stays ``Provisioned=False``; a gang that runs has members without
``run-seconds``, which kwok keeps running until they are deleted. Deletion on the real stack is
asynchronous (the garbage collector follows the owner ConfigMap; kwok finishes a bound pod's
graceful deletion), so the tests wait until nothing of the gang is left.

Upstream: the triggerer calls a cancelled trigger's ``on_kill`` in Airflow 3.3
(``airflow/jobs/triggerer_job_runner.py``); a worker's task runner calls the operator's on a kill
(``airflow/sdk/execution_time/task_runner.py``).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import naming
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.test_kill_and_adopt import on_kill_with_state
from tests.real.backends import RealBackend, wait_for
from tests.real.members import RUNS_UNTIL_DELETED, gang_leftovers, nothing_left

pytestmark = pytest.mark.timeout(300)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
NEVER_PROVISIONED = 9
"""Members beyond every pool an on-demand gang may use (``scenarios/gpu.yaml``: 4 + 2 + 2 nodes)."""


def gang_operator(cluster: RealBackend, *, size: int, deferrable: bool) -> GangTrainingOperator:
    return GangTrainingOperator(
        task_id="train",
        size=size,
        gpus=1,
        cpu="1",
        pod_template=RUNS_UNTIL_DELETED,
        provisioning_class=ATOMIC,
        deferrable=deferrable,
        kubernetes_conn_id=cluster.conn_id,
    )


def running_members(cluster: RealBackend, gang: str, size: int) -> bool:
    pods = cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang},{naming.ROLE_LABEL}=member")
    return len(pods) == size and all((pod.get("status") or {}).get("phase") == "Running" for pod in pods)


def test_the_trigger_s_on_kill_while_waiting_deletes_the_reservation(cluster: RealBackend) -> None:
    """Cancelled while the task is still deferred (a trigger moved to another triggerer), it keeps the
    gang; marked failed, it deletes it."""
    op = gang_operator(cluster, size=NEVER_PROVISIONED, deferrable=True)
    trigger = deferred(op.execute, context_for(FakeTaskInstance("real_kill_waiting", "run-1")))
    gang = trigger.gang_name
    assert {"v1/configmaps", "v1/podtemplates", REQUESTS} <= set(gang_leftovers(cluster, gang))
    on_kill_with_state(trigger, "deferred")
    owner = cluster.objects("v1/configmaps", label_selector=f"{naming.GANG_LABEL}={gang}")
    assert [item["metadata"].get("deletionTimestamp") for item in owner] == [None]
    on_kill_with_state(trigger, "failed")
    nothing_left(cluster, gang)


def test_the_trigger_s_on_kill_while_running_deletes_the_members(cluster: RealBackend) -> None:
    op = gang_operator(cluster, size=2, deferrable=True)
    context = context_for(FakeTaskInstance("real_kill_running", "run-1"))
    reserved = first_event(deferred(op.execute, context), timeout=180)
    assert reserved["reason"] == "reserved", reserved
    run = deferred(op.execute_reserved, context, reserved)
    wait_for(lambda: running_members(cluster, run.gang_name, 2), timeout=120, what="both members running")
    on_kill_with_state(run, "failed")
    nothing_left(cluster, run.gang_name)


class BlockingTry:
    """One blocking try of ``op`` in a worker thread, as a worker runs it; what it ended with."""

    def __init__(self, op: GangTrainingOperator, dag_id: str) -> None:
        self.gang = naming.gang_name(dag_id, "train", "run-1", attempt=1)
        self.ended: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(op, dag_id), name=f"worker-{dag_id}", daemon=True)
        self._thread.start()

    def _run(self, op: GangTrainingOperator, dag_id: str) -> None:
        try:
            op.execute(context_for(FakeTaskInstance(dag_id, "run-1")))
        except BaseException as error:  # the try ends with the kill
            self.ended.append(error)

    def join(self) -> BaseException | None:
        self._thread.join(120)
        assert not self._thread.is_alive(), "the killed try did not end"
        return self.ended[0] if self.ended else None


def waiting_request(cluster: RealBackend, gang: str) -> list[dict[str, Any]]:
    return cluster.objects(REQUESTS, label_selector=f"{naming.GANG_LABEL}={gang}")


def test_the_operator_s_on_kill_while_waiting_ends_the_try_and_deletes_the_reservation(cluster: RealBackend) -> None:
    op = gang_operator(cluster, size=NEVER_PROVISIONED, deferrable=False)
    worker = BlockingTry(op, "real_blocking_kill_waiting")
    wait_for(lambda: waiting_request(cluster, worker.gang), timeout=120, what="the try's ProvisioningRequest")
    op.on_kill()
    assert isinstance(worker.join(), AirflowTaskTerminated)
    nothing_left(cluster, worker.gang)


def test_the_operator_s_on_kill_while_running_ends_the_try_and_deletes_the_members(cluster: RealBackend) -> None:
    op = gang_operator(cluster, size=2, deferrable=False)
    worker = BlockingTry(op, "real_blocking_kill_running")
    wait_for(lambda: running_members(cluster, worker.gang, 2), timeout=180, what="both members running")
    op.on_kill()
    assert isinstance(worker.join(), AirflowTaskTerminated)
    nothing_left(cluster, worker.gang)
