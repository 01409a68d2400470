"""A Kueue MultiKueue manager and two workers on three ``gang-sim`` instances, for
``tests/e2e/test_multikueue.py`` and the reliability table (``gang_sim.testing.multikueue``).

The manager (``kubernetes_default``) runs no member: its ClusterQueue ``cq-team`` (8 GPUs of quota)
dispatches through the MultiKueue admission check to ``worker-1`` (connection :data:`WORKER_1_CONN`:
one CPU node, and a ClusterQueue without ``nvidia.com/gpu``, so it never admits a GPU gang) and
``worker-2`` (:data:`WORKER_2_CONN`: four idle 1-GPU nodes, a ClusterQueue of 4 GPUs). The same
LocalQueue ``team`` is in ``default`` everywhere, as MultiKueue needs. Also what the tests share:
the operator's arguments (:func:`arguments`), what is left of any gang (:func:`leftovers`), a try
driven to its run wait (:func:`launched`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import naming
from demo.cluster import CONN_ID
from gang_sim.testing import ClusterHarness
from gang_sim.testing import multikueue as wiring
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_kill_and_adopt import running_pods
from tests.e2e.two_clusters import FOUR_GPUS, NO_GPUS

WORKER_1, WORKER_2 = "worker-1", "worker-2"
WORKER_1_CONN, WORKER_2_CONN = "kube_worker1", "kube_worker2"
CONNECTIONS = {WORKER_1: WORKER_1_CONN, WORKER_2: WORKER_2_CONN}
QUEUE = "team"
DDP_IMAGE = "local/ddp-trainer:multikueue"
"""An image worker-2's kubelet runs as a local process (its ``command``: real PyTorch DDP)."""
MANAGER: dict[str, Any] = {
    "name": "multikueue-manager",
    "description": "a MultiKueue manager: no node runs a member here",
    "seed": 7,
    "nodePools": [
        {
            "name": "system",
            "zone": "zone-m",
            "cpu": "4",
            "memory": "16Gi",
            "minNodes": 1,
            "maxNodes": 1,
            "initialNodes": 1,
        }
    ],
}
CPU_ONLY = {"cpu": "64", "memory": "256Gi"}
FOUR_GPU_QUOTA = {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}
MANAGER_QUOTA = {"cpu": "128", "memory": "512Gi", "nvidia.com/gpu": "8"}


@dataclass(frozen=True)
class MultiKueueClusters:
    manager: ClusterHarness
    workers: dict[str, ClusterHarness]

    def all(self) -> dict[str, ClusterHarness]:
        return {"manager": self.manager, **self.workers}


def multikueue_clusters(cluster_factory: Any, *, time_scale: float = 60) -> MultiKueueClusters:
    """Start the three clusters (each with its Airflow connection) and wait until both workers and every
    queue are active."""
    workers = {
        WORKER_1: cluster_factory({**NO_GPUS, "name": WORKER_1}, time_scale=time_scale, conn_id=WORKER_1_CONN),
        WORKER_2: cluster_factory(
            {**FOUR_GPUS, "name": WORKER_2, "localProcessImages": ["python:*", DDP_IMAGE]},
            time_scale=time_scale,
            conn_id=WORKER_2_CONN,
        ),
    }
    manager = cluster_factory(MANAGER, time_scale=time_scale)
    quotas = {WORKER_1: CPU_ONLY, WORKER_2: FOUR_GPU_QUOTA}
    wiring.connect(
        manager, {name: (harness, quotas[name]) for name, harness in workers.items()}, manager_quota=MANAGER_QUOTA
    )
    wiring.wait_until_active(manager, workers)
    return MultiKueueClusters(manager, workers)


GANG_KINDS = ("batch/v1/jobs", "v1/pods", "v1/services", "v1/configmaps", "kueue.x-k8s.io/v1beta2/workloads")
QUICK = {"retry_attempts": 2, "retry_base_delay": 0.1, "retry_max_delay": 0.5, "request_timeout": 2.0}


def leftovers(clusters: MultiKueueClusters) -> dict[str, list[str]]:
    """What of any gang is on any of the three clusters: the gang-labelled objects and every Workload."""
    found: dict[str, list[str]] = {}
    for place, cluster in clusters.all().items():
        for kind in GANG_KINDS:
            selector = "" if kind.endswith("workloads") else naming.GANG_LABEL
            names = [item["metadata"]["name"] for item in cluster.objects(kind, None, label_selector=selector)]
            if names:
                found[f"{place} {kind}"] = names
    return found


def nothing_left(clusters: MultiKueueClusters) -> None:
    """Until nothing of any gang is left anywhere (MultiKueue removes the workers' copies on its own)."""
    eventually(lambda: leftovers(clusters) == {} or None, timeout=30.0, what="nothing left on the three clusters")


def arguments(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "size": 2,
        "gpus": 1,
        "pod_template": simulated_pod(120),
        "reservation": "kueue",
        "kueue_queue": QUEUE,
        "deferrable": True,
        "multikueue_connections": CONNECTIONS,
        "reservation_timeout": timedelta(seconds=30),
        "startup_timeout": timedelta(seconds=60),
        "client_options": QUICK,
        "kubernetes_conn_id": CONN_ID,
    }
    return {**values, **overrides}


def running_on_worker(clusters: MultiKueueClusters, gang: str) -> int:
    return running_pods(clusters.workers[WORKER_2], gang)


def launched(clusters: MultiKueueClusters, op: GangTrainingOperator, context: Any) -> Any:
    """Try 1 through its reservation to its run wait, the members running on worker-2; the run trigger."""
    event = first_event(deferred(op.execute, context))
    assert event["status"] == "success", event
    run = deferred(op.execute_reserved, context, event)
    eventually(lambda: running_on_worker(clusters, run.gang_name) == 2 or None, timeout=30.0, what="members running")
    return run


def watching_pods(cluster: ClusterHarness) -> bool:
    """Whether a WATCH of pods has been answered on ``cluster`` (only a run trigger watches pods there)."""
    entries = cluster.emulator.context.requests.snapshot()  # type: ignore[union-attr]
    return any(entry["verb"] == "watch" and entry["resource"] == "pods" and entry["code"] == 200 for entry in entries)
