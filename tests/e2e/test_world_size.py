"""Kueue partial admission tells the members the admitted size, never the requested one: the Job's
size variables read the gang's world ConfigMap, which the try writes only after Kueue admitted the
Workload; until then the admitted members wait in ``CreateContainerConfigError`` (not a failure), and
none starts before it exists. A world ConfigMap left with another size is corrected; one that cannot
be written ends the try with a typed, recorded reason and leaves nothing.

Driven step by step (``tests.e2e.driving``) so each test can look at the cluster between the
reservation event and the launch."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.phases import Reason
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_modes import kueue_queues

QUICK_CLIENT = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1, "request_timeout": 10.0}
KINDS = ("v1/pods", "v1/configmaps", "v1/services", "batch/v1/jobs")


class Recorder:
    """Every committed change to pods and ConfigMaps, in order (the Store's subscription)."""

    def __init__(self, cluster: ClusterHarness) -> None:
        self.changes: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        store = cluster.store
        cluster.run(lambda: store.subscribe(self._record))

    def _record(self, event: str, resource: str, obj: dict[str, Any]) -> None:
        if resource in ("v1/pods", "v1/configmaps"):
            with self._lock:
                self.changes.append((event, resource, obj))

    def first(self, predicate: Any) -> int | None:
        with self._lock:
            return next(
                (index for index, (event, resource, obj) in enumerate(self.changes) if predicate(event, resource, obj)),
                None,
            )


def _world_created(name: str) -> Any:
    return lambda event, resource, obj: (event, resource, obj["metadata"]["name"]) == ("ADDED", "v1/configmaps", name)


def _pod_running(event: str, resource: str, obj: dict[str, Any]) -> bool:
    return resource == "v1/pods" and (obj.get("status") or {}).get("phase") == "Running"


def partial_gang(cluster: ClusterHarness, run_seconds: float = 20) -> GangTrainingOperator:
    kueue_queues(cluster, {"team-two": 2})
    return GangTrainingOperator(
        task_id="train",
        size=4,
        min_size=2,
        gpus=1,
        pod_template=simulated_pod(run_seconds),
        distributed="torch",
        reservation="kueue",
        kueue_queue="team-two",
        deferrable=True,
        kubernetes_conn_id=CONN_ID,
        client_options=QUICK_CLIENT,
    )


def admitted(cluster: ClusterHarness, op: GangTrainingOperator, context: dict[str, Any]) -> tuple[str, Any]:
    """Run the reservation stage to Kueue's admission; the gang name and the event."""
    reservation = deferred(op.execute, context)
    event = first_event(reservation)
    assert (event["status"], event["admitted_count"]) == ("success", 2), event
    return reservation.gang_name, event


def members(cluster: ClusterHarness, gang: str) -> list[dict[str, Any]]:
    return cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}")


def waiting_reasons(cluster: ClusterHarness, gang: str) -> list[tuple[str, str]]:
    return [
        (status["state"]["waiting"]["reason"], status["state"]["waiting"].get("message", ""))
        for pod in members(cluster, gang)
        for status in (pod.get("status") or {}).get("containerStatuses") or []
        if "waiting" in status["state"]
    ]


def leftovers(cluster: ClusterHarness, gang: str) -> dict[str, list[str]]:
    selector = f"{naming.GANG_LABEL}={gang}"
    found = {
        kind: [item["metadata"]["name"] for item in cluster.objects(kind, label_selector=selector)] for kind in KINDS
    }
    return {kind: names for kind, names in found.items() if names}


def test_admitted_members_wait_for_the_world_config_map_then_run_with_the_admitted_size(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    recorder = Recorder(cluster)
    op = partial_gang(cluster)
    context = context_for(FakeTaskInstance("world_size", "run-1"))
    gang, event = admitted(cluster, op, context)
    world = f"{gang}-world"
    expected = [("CreateContainerConfigError", f'configmap "{world}" not found')] * 2
    eventually(
        lambda: waiting_reasons(cluster, gang) == expected,
        timeout=30.0,
        what="the 2 pods Kueue started waiting for the world ConfigMap",
    )
    assert len(members(cluster, gang)) == 2 and recorder.first(_pod_running) is None

    run = deferred(op.execute_reserved, context, event)  # writes the world ConfigMap first, then watches
    (config_map,) = cluster.objects(
        "v1/configmaps", label_selector=f"{naming.GANG_LABEL}={gang},{naming.ROLE_LABEL}=rendezvous"
    )
    owner = next(item for item in cluster.objects("v1/configmaps") if item["metadata"]["name"] == gang)
    assert (config_map["metadata"]["name"], config_map["data"]) == (world, {"size": "2"})
    assert config_map["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    job = cluster.objects("batch/v1/jobs", label_selector=f"{naming.GANG_LABEL}={gang}")[0]
    env = {item["name"]: item for item in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["WORLD_SIZE"]["valueFrom"] == {"configMapKeyRef": {"name": world, "key": "size"}}

    summary = op.execute_finished(context, first_event(run))
    assert (summary["size_requested"], summary["size_run"], summary["exit_codes"]) == (4, 2, {"0": 0, "1": 0})
    created, first_running = recorder.first(_world_created(world)), recorder.first(_pod_running)
    assert created is not None and first_running is not None and created < first_running
    eventually(lambda: leftovers(cluster, gang) == {}, timeout=30.0, what="nothing left of the gang")


def test_a_world_config_map_left_with_another_size_is_corrected(cluster_factory: Any) -> None:
    """As after a worker that wrote it died and Kueue admitted another count meanwhile."""
    cluster = cluster_factory("small", time_scale=60)
    op = partial_gang(cluster)
    context = context_for(FakeTaskInstance("world_corrected", "run-1"))
    gang, event = admitted(cluster, op, context)
    owner = next(item for item in cluster.objects("v1/configmaps") if item["metadata"]["name"] == gang)
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": gang, "uid": owner["metadata"]["uid"]}
    cluster.create(
        "v1/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "data": {"size": "3"},
            "metadata": {"name": f"{gang}-world", "labels": {naming.GANG_LABEL: gang}, "ownerReferences": [reference]},
        },
        "default",
    )
    run = deferred(op.execute_reserved, context, event)
    world = next(item for item in cluster.objects("v1/configmaps") if item["metadata"]["name"] == f"{gang}-world")
    assert world["data"] == {"size": "2"}
    summary = op.execute_finished(context, first_event(run))
    assert summary["size_run"] == 2 and summary["exit_codes"] == {"0": 0, "1": 0}


def test_a_world_config_map_that_cannot_be_written_ends_the_try_recorded_and_nothing_started(
    cluster_factory: Any,
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    recorder = Recorder(cluster)
    op = partial_gang(cluster)
    context = context_for(FakeTaskInstance("world_fails", "run-1"))
    gang, event = admitted(cluster, op, context)
    eventually(lambda: len(waiting_reasons(cluster, gang)) == 2, timeout=30.0, what="both started members waiting")
    cluster.emulator.faults = Faults.parse("create/configmaps:1.0:503")  # past the client's retries
    try:
        with pytest.raises(GangTryFailed) as caught:
            op.execute_reserved(context, event)
    finally:
        cluster.emulator.faults = Faults()
    assert caught.value.reason is Reason.CLUSTER_UNREACHABLE
    assert [(record.attempt, record.outcome) for record in TryHistory(context).finished()] == [
        (1, "cluster_unreachable")
    ]
    eventually(lambda: leftovers(cluster, gang) == {}, timeout=30.0, what="the gang torn down when it ended")
    assert recorder.first(_pod_running) is None  # no member ever ran without its size
