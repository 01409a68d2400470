"""Every cloud profile through ``dag.test()`` on a cluster labelled as that cloud labels its pools
(the scenario's ``cloud``, ``gang_sim.world.node_clouds``):

- ``spot=False`` keeps the gang off spot nodes, though idle spot nodes would fit it (and GKE's
  profile on an EKS cluster does not: the profile is what keeps it off);
- a reclaimed spot node ends the try ``spot_preempted``, not as an ordinary lost member, so the
  ladder's ``OnDemand()`` answers it;
- ``use_reservation`` is refused where the profile has no reservation label - at parse time when
  the operator names the cloud, and before anything is created when the connection's extra does.

The profile comes from the operator's ``cloud`` argument or the connection's extra ``cloud``; both
ways are used below."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import OnDemand
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from demo.cluster import CONN_ID
from gang_sim.testing.eventually import eventually
from tests.builders import GPU_TAINT
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance

CLOUDS = ["gke", "eks", "karpenter", "aks"]
SPOT_LABELS = {
    "gke": ("cloud.google.com/gke-spot", "true"),
    "eks": ("eks.amazonaws.com/capacityType", "SPOT"),
    "karpenter": ("karpenter.sh/capacity-type", "spot"),
    "aks": ("kubernetes.azure.com/scalesetpriority", "spot"),
}


def gpu_pool(name: str, *, spot: bool, initial: int, maximum: int) -> dict[str, Any]:
    return {
        "name": name,
        "zone": "zone-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 4,
        "cpu": "48",
        "memory": "192Gi",
        "taints": [GPU_TAINT],
        "initialNodes": initial,
        "maxNodes": maximum,
        "provisioningDelaySeconds": 60,
        "spot": spot,
    }


def scenario(cloud: str, *, spot_nodes: int = 2, on_demand_nodes: int = 2) -> dict[str, Any]:
    return {
        "name": f"{cloud}-spot-and-on-demand",
        "cloud": cloud,
        "zones": {"zone-a": {"gpuQuota": 64}},
        "nodePools": [
            {"name": "cpu", "zone": "zone-a", "cpu": "16", "memory": "64Gi", "initialNodes": 1, "maxNodes": 1},
            gpu_pool("l4-spot", spot=True, initial=spot_nodes, maximum=spot_nodes),
            gpu_pool("l4", spot=False, initial=0, maximum=on_demand_nodes),
        ],
    }


def set_connection_cloud(cloud: str) -> None:
    """Add ``cloud`` to the extra of the connection the simulated cluster set (``demo.cluster``)."""
    variable = f"AIRFLOW_CONN_{CONN_ID.upper()}"
    connection = json.loads(os.environ[variable])
    connection["extra"]["cloud"] = cloud
    os.environ[variable] = json.dumps(connection)


class Placements:
    """Every node a pod was bound to, from now on (nodes may be deleted before the test looks)."""

    def __init__(self, cluster: Any) -> None:
        self.pods: dict[str, str] = {}
        self.node_labels: dict[str, dict[str, str]] = {
            node["metadata"]["name"]: node["metadata"].get("labels") or {}
            for node in cluster.objects("v1/nodes", namespace="")
        }
        cluster.run(lambda: cluster.store.subscribe(self._record))

    def _record(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "v1/pods" and (obj.get("spec") or {}).get("nodeName"):
            self.pods[obj["metadata"]["name"]] = obj["spec"]["nodeName"]
        elif resource == "v1/nodes":
            self.node_labels[obj["metadata"]["name"]] = obj["metadata"].get("labels") or {}

    def on_spot(self, cloud: str) -> dict[str, bool]:
        """For every pod placed so far, whether its node carries ``cloud``'s spot label."""
        key, value = SPOT_LABELS[cloud]
        return {pod: self.node_labels.get(node, {}).get(key) == value for pod, node in self.pods.items()}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_an_on_demand_gang_stays_off_idle_spot_nodes(cluster_factory: Any, run_dag: Any, cloud: str) -> None:
    cluster = cluster_factory(scenario(cloud), time_scale=60)
    set_connection_cloud(cloud)  # the cluster's cloud, from the connection
    placed = Placements(cluster)
    dag = gang_dag(
        f"on_demand_{cloud}",
        size=4,
        gpus=2,
        pod_template=simulated_pod(20),
        deferrable=True,
        reservation_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    assert summary_of(dag_run)["size_run"] == 4
    on_spot = placed.on_spot(cloud)
    assert len(on_spot) == 4 and not any(on_spot.values()), (on_spot, placed.pods)


def test_without_the_eks_profile_an_on_demand_gang_lands_on_eks_spot_nodes(cluster_factory: Any, run_dag: Any) -> None:
    """The control: GKE's profile on an EKS cluster excludes a label no node has, so the idle spot
    nodes take the gang - what ``spot=False`` did on every cloud but GKE before profiles."""
    cluster = cluster_factory(scenario("eks", on_demand_nodes=0), time_scale=60)
    placed = Placements(cluster)
    dag = gang_dag(
        "on_demand_wrong_profile",
        size=4,
        gpus=2,
        cloud="gke",
        pod_template=simulated_pod(20),
        deferrable=True,
        reservation_timeout=timedelta(seconds=60),
    )
    run_dag(dag)
    on_spot = placed.on_spot("eks")
    assert len(on_spot) == 4 and all(on_spot.values()), (on_spot, placed.pods)


class Reclaimer(threading.Thread):
    """Outside the code under test, as the cloud would: once every member of the gang runs, reclaim
    the node of rank 1 (by default 5 simulated seconds of grace for its pods and the VM stopped 10
    minutes later, so the stopped pod is there to be seen however late the run trigger watches)."""

    def __init__(
        self,
        cluster: Any,
        size: int,
        *,
        notice_seconds: float = 600,
        grace_seconds: float = 5,
        settle_seconds: float = 0.0,
    ) -> None:
        super().__init__(daemon=True)
        self.cluster, self.size, self.settle_seconds = cluster, size, settle_seconds
        self.notice_seconds, self.grace_seconds = notice_seconds, grace_seconds
        self.reclaimed: list[str] = []
        self.error: BaseException | None = None

    def running(self) -> dict[str, dict[str, Any]]:
        members = [item for item in self.cluster.objects("v1/pods") if "-t1-" in item["metadata"]["name"]]
        return {
            item["metadata"]["name"]: item for item in members if (item.get("status") or {}).get("phase") == "Running"
        }

    def run(self) -> None:
        try:
            running: dict[str, dict[str, Any]] = eventually(
                lambda: found if len(found := self.running()) == self.size else None,
                timeout=120,
                what="every member running",
                interval=0.05,
            )
            time.sleep(self.settle_seconds)  # real seconds: the run trigger's first LIST sees the members bound
            rank_1 = next(pod for name, pod in running.items() if name.endswith("-1"))
            node = rank_1["spec"]["nodeName"]
            self.reclaimed = self.cluster.preempt(
                node, notice_seconds=self.notice_seconds, pod_grace_period_seconds=self.grace_seconds
            )
        except BaseException as error:  # reported by the test
            self.error = error


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_reclaimed_spot_node_is_reported_spot_preempted(cluster_factory: Any, run_dag: Any, cloud: str) -> None:
    cluster = cluster_factory(scenario(cloud), time_scale=60)
    placed = Placements(cluster)
    reclaimer = Reclaimer(cluster, size=2)
    reclaimer.start()
    dag = gang_dag(
        f"reclaimed_{cloud}",
        retries=1,
        fallbacks=[OnDemand()],
        size=2,
        gpus=4,  # one member per node
        spot=True,
        cloud=cloud,  # the operator's argument this time
        pod_template=simulated_pod(120),
        deferrable=True,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=120),
    )
    dag_run = run_dag(dag)
    reclaimer.join(timeout=5)
    assert reclaimer.error is None, reclaimer.error
    assert len(reclaimer.reclaimed) == 1
    tries = summary_of(dag_run)["tries"]
    assert [(item["step"], item["outcome"]) for item in tries] == [
        ("as configured", "spot_preempted"),
        ("spot to on-demand", "all_succeeded"),
    ], tries
    on_spot = placed.on_spot(cloud)
    assert {pod: spot for pod, spot in on_spot.items() if "-t1-" in pod} == {
        pod: True for pod in on_spot if "-t1-" in pod
    }
    assert len(on_spot) == 4 and sum(on_spot.values()) == 2, on_spot  # try 2 left spot


@pytest.mark.parametrize("cloud", ["eks", "karpenter", "aks"])
def test_use_reservation_is_refused_at_parse_time_where_the_named_profile_has_none(cloud: str) -> None:
    with pytest.raises(GangArgumentError, match=f"cloud profile {cloud!r} has no reservation label") as caught:
        gang_dag(f"reservation_{cloud}", size=2, gpus=4, cloud=cloud, use_reservation="l4-reservation", image="i")
    assert caught.value.argument == "use_reservation"


@pytest.mark.parametrize("cloud", ["eks", "karpenter", "aks"])
def test_use_reservation_is_refused_before_anything_is_created_where_the_connections_profile_has_none(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str], cloud: str
) -> None:
    cluster = cluster_factory(scenario(cloud), time_scale=60)
    set_connection_cloud(cloud)
    dag = gang_dag(
        f"reservation_connection_{cloud}",
        retries=1,
        size=2,
        gpus=4,
        use_reservation="l4-reservation",
        pod_template=simulated_pod(20),
        deferrable=True,
    )
    dag_run = run_dag(dag)
    log = capfd.readouterr().out
    assert task_instance(dag_run).state == "failed"
    assert f"cloud profile {cloud!r} has no reservation label" in log
    assert "'use_reservation'" in log
    for kind in ("v1/pods", "v1/podtemplates", "autoscaling.x-k8s.io/v1/provisioningrequests", "v1/configmaps"):
        mine = [item for item in cluster.objects(kind) if item["metadata"]["name"].startswith("reservation-")]
        assert not mine, (kind, mine)


def test_a_rank_whose_node_was_removed_gets_a_note_instead_of_its_log(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Rank 1's spot node is reclaimed with almost no notice: node and pod are gone when the try's
    logs are read. Rank 0's log is copied; rank 1 gets a line saying why it has none."""
    cluster = cluster_factory(scenario("gke"), time_scale=60)
    # The node goes 2 simulated seconds after its notice: the trigger must have seen rank 1 on it
    # first (else it cannot tell a removed node from a removed pod), so the reclaim waits 2 s.
    reclaimer = Reclaimer(cluster, size=2, notice_seconds=2, grace_seconds=1, settle_seconds=2.0)
    reclaimer.start()
    dag = gang_dag(
        "node_removed_log",
        size=2,
        gpus=4,
        spot=True,
        log_ranks="all",
        pod_template=simulated_pod(3600),
        deferrable=True,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=120),
    )
    dag_run = run_dag(dag)
    reclaimer.join(timeout=5)
    assert reclaimer.error is None, reclaimer.error
    log = capfd.readouterr().out
    assert task_instance(dag_run).state == "failed"
    assert "(rank 1: log unavailable - its node was removed)" in log, log[-3000:]
    assert "(rank 0: log unavailable" not in log
