"""The try history where Airflow has no task state store (3.1, 3.2): ``operators.try_history``'s
ConfigMap per task instance, through its public interface and through the operator, on the emulator.

The operator tests drive a try by hand (``tests.e2e.driving``) with contexts that have no
``task_state_store`` - as Airflow 3.1 and 3.2 give them - so the store is selected by feature
detection, as in a real task. They run in every venv of ``make versions`` and in the main one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import EXPIRES_ANNOTATION, ClusterTryStore
from airflow_provider_gang.reservation import manifests, naming
from airflow_provider_gang.reservation.fallback import ShrinkTo
from airflow_provider_gang.reservation.naming import try_history_name
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.spec import GangSpec
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_kill_and_adopt import gang_objects, owner_try

QUICK_CLIENT = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1, "request_timeout": 10.0}
"""A client that gives up fast, so "a call failing past its retries" takes milliseconds."""


def on_cluster_of(cluster: ClusterHarness) -> Callable[[Callable[[KubeClient], Awaitable[Any]]], Any]:
    """What ``TryRun.cluster`` is to the store: a fresh client of ``cluster`` per call."""
    settings = ConnectionSettings(kubeconfig=yaml.safe_load(cluster.kubeconfig_path.read_text()))
    options = ClientOptions.from_dict(QUICK_CLIENT)

    def run(work: Callable[[KubeClient], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with await options.connect(settings) as client:
                return await work(client)

        return asyncio.run(main())

    return run


def store(cluster: ClusterHarness, run_id: str = "run-1") -> ClusterTryStore:
    return ClusterTryStore(on_cluster_of(cluster), "default", dag_id="store", run_id=run_id, task_id="train")


def without_task_state_store(ti: FakeTaskInstance) -> Any:
    """The context Airflow 3.1 and 3.2 give a task: no ``task_state_store``."""
    context = context_for(ti)
    del context["task_state_store"]
    return context


def history(cluster: ClusterHarness, dag_id: str) -> dict[str, Any]:
    """The history ConfigMap of ``dag_id``'s ``train`` in run ``run-1``, its values decoded."""
    found = [
        item
        for item in cluster.objects("v1/configmaps", "default")
        if item["metadata"]["name"] == try_history_name(dag_id, "run-1", "train")
    ]
    assert len(found) == 1, f"one history ConfigMap, found {len(found)}"
    return {key: yaml.safe_load(value) for key, value in (found[0].get("data") or {}).items()}


def test_values_survive_a_new_store_and_deletes_are_idempotent(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)
    first = store(cluster)
    assert first.get(task_state.CURRENT_KEY) is None
    assert first.get(task_state.TRIES_KEY, default=[]) == []
    first.delete(task_state.CURRENT_KEY)  # nothing written yet: nothing created
    assert not [item for item in cluster.objects("v1/configmaps", "default") if item["metadata"]["name"] == first.name]
    first.set(task_state.TRIES_KEY, [{"attempt": 1, "outcome": "deadline"}])
    first.set(task_state.CURRENT_KEY, {"plan": {"attempt": 2}})
    retry = store(cluster)  # the next try's worker: a new process, a new store
    assert retry.get(task_state.TRIES_KEY) == [{"attempt": 1, "outcome": "deadline"}]
    retry.delete(task_state.CURRENT_KEY)
    retry.delete(task_state.CURRENT_KEY)
    assert first.get(task_state.CURRENT_KEY) is None
    assert first.get(task_state.TRIES_KEY) == [{"attempt": 1, "outcome": "deadline"}]
    assert store(cluster, run_id="run-2").get(task_state.TRIES_KEY) is None  # scoped to one task instance
    (made,) = [item for item in cluster.objects("v1/configmaps", "default") if item["metadata"]["name"] == first.name]
    assert naming.GANG_LABEL not in made["metadata"]["labels"]  # no teardown or withdrawal selects it
    with pytest.raises(ValueError, match="None"):
        first.set(task_state.CURRENT_KEY, None)


def test_a_write_failing_past_the_retries_raises_and_keeps_the_last_value(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)
    history_store = store(cluster)
    history_store.set(task_state.CURRENT_KEY, {"plan": {"attempt": 1}})
    cluster.emulator.faults = Faults.parse("patch/configmaps:1.0:503")
    try:
        with pytest.raises(errors.KubeError):
            history_store.set(task_state.CURRENT_KEY, {"plan": {"attempt": 2}})
    finally:
        cluster.emulator.faults = Faults()
    assert history_store.get(task_state.CURRENT_KEY) == {"plan": {"attempt": 1}}


def test_the_first_write_deletes_expired_histories_only(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)
    expired, kept = store(cluster, run_id="old"), store(cluster, run_id="recent")
    expired.set(task_state.TRIES_KEY, [])
    kept.set(task_state.TRIES_KEY, [])
    cluster.run(
        lambda: cluster.store.patch(
            "v1/configmaps",
            expired.name,
            {"metadata": {"annotations": {EXPIRES_ANNOTATION: "2020-01-01T00:00:00Z"}}},
            namespace="default",
        )
    )
    store(cluster).set(task_state.TRIES_KEY, [])
    names = {item["metadata"]["name"] for item in cluster.objects("v1/configmaps", "default")}
    assert kept.name in names and expired.name not in names


def operator(**arguments: Any) -> GangTrainingOperator:
    values: dict[str, Any] = {
        "task_id": "train",
        "size": 4,
        "gpus": 1,
        "pod_template": simulated_pod(30),
        "deferrable": True,
        "distributed": "torch",
        "kubernetes_conn_id": CONN_ID,
        "client_options": QUICK_CLIENT,
        **arguments,
    }
    return GangTrainingOperator(**values)


def test_retry_after_a_worker_died_with_half_the_pods_created_adopts_them(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    op = operator()
    first = without_task_state_store(FakeTaskInstance("fallback_adopt", "run-1", try_number=1))
    reservation = deferred(op.execute, first)
    assert history(cluster, "fallback_adopt")[task_state.CURRENT_KEY]["plan"]["attempt"] == 1
    assert first_event(reservation)["status"] == "success"
    gang = reservation.gang_name
    # The worker of try 1 dies while launching: only ranks 0 and 1 were created.
    spec = GangSpec.from_dict(op.build_spec(gang).to_dict())
    (owner,) = cluster.objects("v1/configmaps", label_selector=f"{naming.GANG_LABEL}={gang}")
    for rank in (0, 1):
        cluster.create("v1/pods", manifests.pods.launch_pod(spec, rank, owner_uid=owner["metadata"]["uid"]))
    crashed_pods = {pod["metadata"]["uid"] for pod in cluster.objects("v1/pods")}

    second = without_task_state_store(FakeTaskInstance("fallback_adopt", "run-1", try_number=2))
    adopted = deferred(op.execute, second)
    assert adopted.gang_name == gang and owner_try(cluster, gang) == "2"
    run_trigger = deferred(op.execute_reserved, second, first_event(adopted))
    pods = cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}")
    assert sorted(pod["metadata"]["name"] for pod in pods) == [naming.GangNames(gang).member(r) for r in range(4)]
    assert crashed_pods <= {pod["metadata"]["uid"] for pod in pods}  # the two survivors were kept
    summary = op.execute_finished(second, first_event(run_trigger))
    assert [(item["attempt"], item["outcome"]) for item in summary["tries"]] == [
        (1, "worker_lost"),
        (2, "all_succeeded"),
    ]
    stored = history(cluster, "fallback_adopt")
    assert [(item["attempt"], item["outcome"]) for item in stored[task_state.TRIES_KEY]] == [
        (1, "worker_lost"),
        (2, "all_succeeded"),
    ]
    assert task_state.CURRENT_KEY not in stored
    eventually(lambda: gang_objects(cluster, gang) == {}, timeout=30.0, what="the gang's objects deleted")


def test_a_failed_try_is_not_adopted_and_the_next_takes_its_fallback_step(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    shrink = ShrinkTo(2, applies_to=frozenset({Reason.CLUSTER_UNREACHABLE}))
    op = operator(min_size=2, retries=1, fallbacks=[shrink], pod_template=simulated_pod(20))
    first = without_task_state_store(FakeTaskInstance("fallback_failed", "run-1", try_number=1))
    reservation = deferred(op.execute, first)
    event = first_event(reservation)
    cluster.emulator.faults = Faults.parse("create/pods:1.0:503")  # every member create fails
    try:
        with pytest.raises(GangTryFailed) as caught:
            op.execute_reserved(first, event)
    finally:
        cluster.emulator.faults = Faults()
    assert caught.value.reason is Reason.CLUSTER_UNREACHABLE
    stored = history(cluster, "fallback_failed")
    assert [(item["attempt"], item["outcome"]) for item in stored[task_state.TRIES_KEY]] == [(1, "cluster_unreachable")]
    assert task_state.CURRENT_KEY not in stored

    second = without_task_state_store(FakeTaskInstance("fallback_failed", "run-1", try_number=2))
    retry = deferred(op.execute, second)
    assert retry.gang_name != reservation.gang_name and retry.size == 2  # a new gang, one rung down
    run = deferred(op.execute_reserved, second, first_event(retry))
    summary = op.execute_finished(second, first_event(run))
    assert summary["size_run"] == 2
    assert [(item["attempt"], item["outcome"]) for item in summary["tries"]] == [
        (1, "cluster_unreachable"),
        (2, "all_succeeded"),
    ]
    assert gang_objects(cluster, reservation.gang_name) == {}
