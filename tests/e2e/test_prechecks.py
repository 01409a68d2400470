"""A cluster that cannot run the gang is refused before anything is created, by name, without retry:
kinds not served, permissions missing, a Kueue queue that cannot admit the gang; a zone no node is in
yet is only a warning.

The queue cases call ``execute`` directly: a gang the precheck lets through defers to its reservation
trigger (``TaskDeferred``), so a check that is missing fails the test at once instead of after the
reservation timeout.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangFailedForGood
from airflow_provider_gang.reservation.naming import GANG_LABEL
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from airflow_provider_gang.reservation.validation import KNOWN_PROVISIONING_CLASSES
from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.http.auth import Rule
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred
from tests.e2e.gang_dags import gang_dag, simulated_pod, task_instance
from tests.e2e.test_modes import KUEUE, kueue_queues

GANG_OBJECT_KINDS = (
    "v1/configmaps",
    "v1/pods",
    "v1/podtemplates",
    "v1/services",
    "batch/v1/jobs",
    "autoscaling.x-k8s.io/v1/provisioningrequests",
)
SSAR = "selfsubjectaccessreviews.authorization.k8s.io"


def nothing_created(cluster: Any) -> bool:
    """No object with the gang label, of any kind a gang creates (that the cluster serves)."""
    for kind in GANG_OBJECT_KINDS:
        try:
            if cluster.objects(kind, label_selector=GANG_LABEL):
                return False
        except ApiError as error:  # the kind is not served (a cluster without the CRDs)
            assert error.code == 404, error
    return True


def creates_sent(cluster: Any) -> dict[str, int]:
    """CREATE requests the emulator served since its metrics were reset, SelfSubjectAccessReviews aside."""
    by_resource = cluster.emulator.metrics.snapshot()["requests"].get("create", {})
    return {resource: number for resource, number in by_resource.items() if resource != SSAR}


def test_missing_provisioning_request_crd_fails_fast_by_name(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = cluster_factory("small", time_scale=60, preload_crds=False)
    dag = gang_dag("missing_crd", retries=2, size=2, gpus=1, pod_template=simulated_pod(10), deferrable=True)
    ti = task_instance(run_dag(dag))
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert "does not serve provisioningrequests.autoscaling.x-k8s.io/v1" in capfd.readouterr().out
    assert nothing_created(cluster)


def test_missing_permission_fails_fast_by_name(
    cluster_factory: Any, run_dag: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    _, kubeconfig = cluster.add_user(
        "read-only-autoscaling",
        [
            Rule(groups=("", "batch")),
            Rule(verbs=("get", "list", "watch"), groups=("autoscaling.x-k8s.io",)),
        ],
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_LIMITED", json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})
    )
    dag = gang_dag(
        "missing_permission",
        retries=2,
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        deferrable=True,
        kubernetes_conn_id="limited",
    )
    ti = task_instance(run_dag(dag))
    assert (ti.state, ti.try_number) == ("failed", 1)
    log = capfd.readouterr().out
    assert "missing permission" in log and "create provisioningrequests.autoscaling.x-k8s.io" in log
    assert nothing_created(cluster)


# -- Kueue: the gang's queue must be able to admit it ------------------------------------------------


def cluster_queue(name: str, flavor: str, covered: dict[str, str]) -> dict[str, Any]:
    """A ClusterQueue of one resource group, ``covered`` resource -> nominal quota, in ``flavor``."""
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": list(covered),
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": resource, "nominalQuota": quota} for resource, quota in covered.items()
                            ],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": target},
    }


def active_reason(cluster: Any, resource: str, name: str, namespace: str | None) -> str | None:
    """``status/reason`` of the ``Active`` condition Kueue wrote, or ``None`` before it did."""
    items = cluster.run(lambda: cluster.store.list(f"{KUEUE}/{resource}", namespace)[0])
    for item in items:
        if item["metadata"]["name"] == name:
            for condition in (item.get("status") or {}).get("conditions") or []:
                if condition["type"] == "Active":
                    return f"{condition['status']}/{condition['reason']}"
    return None


@pytest.fixture
def queues_cluster(cluster_factory: Any) -> Any:
    """Two good queues (team-a, team-b: cpu, memory and 4 GPUs) and three that cannot admit a GPU gang:
    team-orphan (its ClusterQueue does not exist), team-inactive (its ClusterQueue names a missing
    ResourceFlavor), team-cpu (its ClusterQueue covers cpu only). Each as Kueue reports it."""
    cluster = cluster_factory("small", time_scale=60)
    kueue_queues(cluster, {"team-a": 4, "team-b": 4})
    cluster.create(f"{KUEUE}/clusterqueues", cluster_queue("cq-inactive", "no-such-flavor", {"nvidia.com/gpu": "4"}))
    cluster.create(f"{KUEUE}/clusterqueues", cluster_queue("cq-cpu", "l4", {"cpu": "64"}))
    for name, target in (("team-orphan", "cq-gone"), ("team-inactive", "cq-inactive"), ("team-cpu", "cq-cpu")):
        cluster.create(f"{KUEUE}/localqueues", local_queue(name, target), "default")
    eventually(
        lambda: active_reason(cluster, "localqueues", "team-orphan", "default") == "False/ClusterQueueDoesNotExist",
        timeout=30.0,
        what="LocalQueue team-orphan inactive: ClusterQueueDoesNotExist",
    )
    eventually(
        lambda: active_reason(cluster, "clusterqueues", "cq-inactive", None) == "False/FlavorNotFound",
        timeout=30.0,
        what="ClusterQueue cq-inactive inactive: FlavorNotFound",
    )
    eventually(
        lambda: active_reason(cluster, "clusterqueues", "cq-cpu", None) == "True/Ready",
        timeout=30.0,
        what="ClusterQueue cq-cpu active",
    )
    cluster.emulator.metrics.reset()
    return cluster


def kueue_gang(queue: str) -> GangTrainingOperator:
    return GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        reservation="kueue",
        kueue_queue=queue,
        deferrable=True,
        reservation_timeout=timedelta(minutes=30),
    )


QUEUE_REFUSALS = {
    "local-queue-missing": (
        "team-x",
        "LocalQueue 'team-x' does not exist in namespace 'default' (LocalQueues there: team-a, team-b, team-cpu, "
        "team-inactive, team-orphan); create it or set kueue_queue to one of them",
    ),
    "cluster-queue-missing": (
        "team-orphan",
        "LocalQueue default/team-orphan cannot admit workloads from ClusterQueue 'cq-gone': LocalQueue Active=False, "
        "ClusterQueueDoesNotExist: ",
    ),
    "cluster-queue-inactive": (
        "team-inactive",
        "LocalQueue default/team-inactive cannot admit workloads from ClusterQueue 'cq-inactive': ClusterQueue "
        "Active=False, FlavorNotFound: ",
    ),
    "no-flavor-with-the-gpu": (
        "team-cpu",
        "ClusterQueue 'cq-cpu' (of LocalQueue default/team-cpu) has no flavor with nvidia.com/gpu: its "
        "resourceGroups cover only cpu; ",
    ),
}


@pytest.mark.parametrize("case", list(QUEUE_REFUSALS))
def test_a_queue_that_cannot_admit_the_gang_fails_at_precheck_by_name(queues_cluster: Any, case: str) -> None:
    queue, expected = QUEUE_REFUSALS[case]
    context: Any = context_for(FakeTaskInstance(f"queue_{case}", "run-1"))
    with pytest.raises(GangFailedForGood) as refused:
        kueue_gang(queue).execute(context)
    message = str(refused.value)
    assert refused.value.reason is Reason.INVALID, message
    assert expected in message, message
    assert creates_sent(queues_cluster) == {}
    assert nothing_created(queues_cluster)


def test_a_queue_that_can_admit_the_gang_passes_the_precheck(queues_cluster: Any) -> None:
    """The same checks let a good queue through: the gang defers to its reservation trigger."""
    deferred(kueue_gang("team-b").execute, context_for(FakeTaskInstance("queue_good", "run-1")))
    assert queues_cluster.objects("batch/v1/jobs", label_selector=GANG_LABEL)


def test_missing_local_queue_fails_the_task_at_its_first_try(
    queues_cluster: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Through a DAG run: the refusal is final (no retry), and the task log names the queues there."""
    dag = gang_dag(
        "missing_queue",
        retries=2,
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        reservation="kueue",
        kueue_queue="team-x",
        deferrable=True,
        reservation_timeout=timedelta(minutes=30),
    )
    ti = task_instance(run_dag(dag))
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert QUEUE_REFUSALS["local-queue-missing"][1] in capfd.readouterr().out
    assert nothing_created(queues_cluster)


# -- provisioning classes and zones -------------------------------------------------------------------


def test_unknown_provisioning_class_is_refused_listing_the_known_ones() -> None:
    """Refused when the DAG is parsed, before any cluster is asked (``reservation.validation``)."""
    with pytest.raises(GangArgumentError) as refused:
        GangTrainingOperator(
            task_id="train", size=2, gpus=1, pod_template=simulated_pod(10), provisioning_class="queued.example.com"
        )
    known = ", ".join(KNOWN_PROVISIONING_CLASSES)
    assert f"'provisioning_class': unknown class 'queued.example.com'; use one of {known}" in str(refused.value)


ZONE_WARNING = (
    "no node in zone us-central1-x yet (nodes are in: us-central1-a); a node pool that scales from "
    "zero may still create one"
)


@pytest.mark.parametrize(("zone", "warned"), [("us-central1-x", True), ("us-central1-a", False)])
def test_a_zone_no_node_is_in_is_a_warning_not_a_failure(
    cluster_factory: Any, capfd: pytest.CaptureFixture[str], zone: str, warned: bool
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    op = GangTrainingOperator(
        task_id="train", size=2, gpus=1, pod_template=simulated_pod(10), zone=zone, deferrable=True
    )
    deferred(op.execute, context_for(FakeTaskInstance(f"zone_{zone}", "run-1")))
    assert (ZONE_WARNING in capfd.readouterr().out) is warned
    assert cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests", label_selector=GANG_LABEL)


def test_zone_check_is_skipped_without_list_nodes(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """``list nodes`` is optional: an identity without it runs the gang, unwarned, and never lists nodes."""
    cluster = cluster_factory("small", time_scale=60)
    _, kubeconfig = cluster.add_user(
        "no-nodes",
        [
            Rule(groups=("",), resources=("configmaps", "pods", "pods/log", "services", "podtemplates")),
            Rule(groups=("autoscaling.x-k8s.io",)),
        ],
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_NO_NODES", json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})
    )
    cluster.emulator.metrics.reset()
    op = GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        zone="us-central1-x",
        deferrable=True,
        kubernetes_conn_id="no_nodes",
    )
    deferred(op.execute, context_for(FakeTaskInstance("zone_no_nodes", "run-1")))
    assert "no node in zone" not in capfd.readouterr().out
    requests = cluster.emulator.metrics.snapshot()["requests"]
    assert "nodes" not in requests.get("list", {}), requests
    assert "403" not in cluster.emulator.metrics.snapshot()["codes"]
