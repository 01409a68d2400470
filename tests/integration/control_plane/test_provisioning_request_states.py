"""Golden tests of the ProvisioningRequest state machines (reference 7.A OSS CA, 7.B GKE queued).

Each transition is observed through the API with the official client while simulated time moves
on a ManualClock. Expected conditions are (status, reason) per condition type.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec, pod
from tests.integration.control_plane.conftest import KUBECTL, dws_cluster, gpu_scenario

CHECK = "check-capacity.autoscaling.x-k8s.io"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
QUEUED = "queued-provisioning.gke.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"


def test_new_request_has_no_conditions_until_the_ca_loop(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 2}))
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, CHECK)
    assert cluster.conditions(cluster.request("gang")) == {}  # NEW: not handled yet
    cluster.advance(10)  # one scan interval
    assert cluster.conditions(cluster.request("gang")) == {
        "Accepted": ("True", "Accepted"),
        "Provisioned": ("True", "CapacityIsFound"),
    }


def test_missing_pod_template_fails_the_request(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_request("gang", "not-created", 2, ATOMIC)
    cluster.advance(10)
    request = cluster.request("gang")
    assert cluster.conditions(request)["Failed"] == ("True", "FailedToCreatePods")
    assert "not-created" in next(c["message"] for c in request["status"]["conditions"] if c["type"] == "Failed")


def test_check_capacity_never_scales_up_and_retries_with_backoff(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 1}))
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, CHECK)
    cluster.advance(10)
    first = cluster.request("gang")
    assert cluster.conditions(first)["Provisioned"] == ("False", "CapacityIsNotFound")
    message = next(c["message"] for c in first["status"]["conditions"] if c["type"] == "Provisioned")
    assert message == "Capacity is not found, CA will try to find it later."
    assert len(cluster.core.list_node().items) == 1  # check-capacity never scales up
    # Two ordinary pods make the pool grow to 2 nodes; once they are gone a retry finds the capacity.
    for name in ("filler-1", "filler-2"):
        cluster.core.create_namespaced_pod("default", pod(name, spec=gpu_pod_spec()))
    cluster.advance(5 * 60)
    assert len(cluster.core.list_node().items) == 2
    for name in ("filler-1", "filler-2"):
        cluster.core.delete_namespaced_pod(name, "default")
    cluster.advance(100)  # attempts were at 10 s, 70 s, 190 s; the next is due at 430 s
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("False", "CapacityIsNotFound")
    cluster.advance(30)  # the 4th attempt at 430 s (backoff 1m, 2m, 4m) finds the two free GPUs
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsFound")


def test_check_capacity_no_retry_fails(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, CHECK, parameters={"noRetry": "true"})
    cluster.advance(10)
    assert cluster.conditions(cluster.request("gang"))["Failed"] == ("True", "CapacityIsNotFound")


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_atomic_scale_up_provisions_all_nodes_at_once(sim_cluster: Callable[..., SimCluster], version: str) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 4, ATOMIC, version=version)
    cluster.advance(10)
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert cluster.core.list_node().items == []  # Provisioned when the scale-up is issued, nodes come later
    cluster.advance(60)
    assert len(cluster.core.list_node().items) == 4


def test_atomic_scale_up_is_all_or_nothing_within_quota(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(
        zones={"us-central1-a": {"gpuQuota": 3}},
        events=[{"at": 120, "type": "quotaChange", "zone": "us-central1-a", "gpuQuota": 8}],
    )
    cluster = sim_cluster(scenario)
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 4, ATOMIC)
    cluster.advance(10)
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("False", "CapacityIsNotFound")
    assert cluster.harness.run(lambda: len(cluster.harness.control.running.plane.cloud.live_nodes())) == 0  # type: ignore[union-attr]
    cluster.advance(5 * 60)  # quota raised at 2 min; retried at the next backoff step
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsProvisioned")


def test_booking_expires_after_ten_minutes_without_pods(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, ATOMIC)
    cluster.advance(10)
    cluster.advance(9 * 60)
    assert "BookingExpired" not in cluster.conditions(cluster.request("gang"))
    assert len(cluster.core.list_node().items) == 2  # booked nodes are not scaled down
    cluster.advance(70)
    assert cluster.conditions(cluster.request("gang"))["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    cluster.advance(11 * 60)  # idle for the unneeded time after the booking ended
    assert cluster.core.list_node().items == []


def test_queued_provisioning_lifecycle(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = dws_cluster(sim_cluster)
    cluster.create_request("dws-gang", "dws-worker", 2, QUEUED, parameters={"maxRunDurationSeconds": "3600"})
    cluster.advance(10)
    conditions = cluster.conditions(cluster.request("dws-gang"))
    assert conditions["Accepted"] == ("True", "SuccessfullyQueued")
    assert "Provisioned" not in conditions
    cluster.advance(120)
    request = cluster.request("dws-gang")
    assert cluster.conditions(request)["Provisioned"][0] == "True"
    resize = request["status"]["provisioningClassDetails"]["ResizeRequestName"]
    nodes = cluster.core.list_node(label_selector=f"autoscaling.gke.io/provisioning-request={resize}").items
    assert len(nodes) == 2
    assert all(node.metadata.labels["cloud.google.com/gke-queued"] == "true" for node in nodes)
    cluster.advance(10 * 60)
    assert cluster.conditions(cluster.request("dws-gang"))["BookingExpired"] == (
        "True",
        "CapacityReservationTimeExpired",
    )
    cluster.advance(3600)
    assert cluster.conditions(cluster.request("dws-gang"))["CapacityRevoked"][0] == "True"
    assert cluster.core.list_node().items == []


def test_queued_request_larger_than_the_pool_fails(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"name": "dws", "queuedProvisioning": True, "maxNodes": 2}))
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("too-big", "worker", 3, QUEUED)
    cluster.advance(10)
    assert cluster.conditions(cluster.request("too-big"))["Failed"] == ("True", "OutOfResources")


def test_consuming_pods_never_trigger_scale_up(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    orphan = pod("orphan-consumer", spec=gpu_pod_spec(), annotations={CONSUME: "missing-request"})
    cluster.core.create_namespaced_pod("default", orphan)
    cluster.advance(5 * 60)
    assert cluster.core.list_node().items == []
    (event,) = cluster.events("NotTriggerScaleUp")
    assert event.message.endswith("consuming ProvisioningRequest default/missing-request")


# The 7-day tests scan once a minute: a week of 10 s scans is 60,480 loop steps (about a minute of CPU).
WEEKLY = {"autoscaler": {"scanIntervalSeconds": 60}}


def test_requests_are_garbage_collected_seven_days_after_failing(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(**WEEKLY))
    cluster.create_request("gang", "not-created", 1, ATOMIC)
    cluster.advance(60)
    assert cluster.conditions(cluster.request("gang"))["Failed"] == ("True", "FailedToCreatePods")
    cluster.advance(7 * 24 * 3600 - 60)
    assert cluster.request("gang")
    cluster.advance(120)
    listed = cluster.custom.list_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", "default", "provisioningrequests"
    )
    assert listed["items"] == []


def test_unprovisioned_request_expires_after_seven_days(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"maxNodes": 1}, **WEEKLY))
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, ATOMIC)
    cluster.advance(60)  # first seen by the scan at 60 s
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("False", "CapacityIsNotFound")
    cluster.advance(7 * 24 * 3600 - 60)
    assert "Failed" not in cluster.conditions(cluster.request("gang"))
    cluster.advance(60)
    assert cluster.conditions(cluster.request("gang"))["Failed"] == ("True", "Expired")


def test_zone_stockout_delays_scale_up_until_it_ends(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(events=[{"at": 0, "until": 300, "type": "zoneSaturated", "zone": "us-central1-a"}])
    cluster = sim_cluster(scenario)
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, ATOMIC)
    cluster.advance(290)
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("False", "CapacityIsNotFound")
    cluster.advance(10 * 60)  # the stockout ended at 5 min; the next retry gets both nodes
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsProvisioned")


def test_node_pool_deletion_removes_its_nodes(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(pool={"initialNodes": 2}, events=[{"at": 60, "type": "nodePoolDeleted", "pool": "gpu"}])
    cluster = sim_cluster(scenario)
    assert len(cluster.core.list_node().items) == 2
    cluster.advance(70)
    assert cluster.core.list_node().items == []


def test_queued_request_stays_queued_when_its_pool_is_deleted(sim_cluster: Callable[..., SimCluster]) -> None:
    # autoscaler#9490: GKE leaves such requests Accepted forever; the provider needs its own timeout.
    scenario = gpu_scenario(
        pool={"name": "dws", "queuedProvisioning": True},
        zones={"us-central1-a": {"gpuQuota": 0}},
        events=[{"at": 30, "type": "nodePoolDeleted", "pool": "dws"}],
    )
    cluster = sim_cluster(scenario)
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("dws-gang", "worker", 2, QUEUED)
    cluster.advance(6 * 3600)
    assert cluster.conditions(cluster.request("dws-gang")) == {"Accepted": ("True", "SuccessfullyQueued")}


def test_kubectl_waits_for_the_provisioned_condition(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, ATOMIC)
    cluster.advance(10)
    kubectl = [KUBECTL, "--kubeconfig", str(cluster.harness.kubeconfig_path)]
    waited = subprocess.run(
        [*kubectl, "wait", "--for=condition=Provisioned", "provreq/gang", "--timeout=20s"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert waited.returncode == 0, waited.stderr
    assert "condition met" in waited.stdout
    reason = subprocess.run(
        [
            *kubectl,
            "get",
            "provisioningrequests.autoscaling.x-k8s.io",
            "gang",
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Provisioned")].reason}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert reason == "CapacityIsProvisioned"


def test_check_capacity_booking_keeps_existing_nodes_from_scale_down(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 2}, autoscaler={"scaleDownUnneededSeconds": 120}))
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, CHECK)
    cluster.advance(10)
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsFound")
    cluster.advance(290)  # idle for 5 min, but booked: the autoscaler keeps them
    assert len(cluster.core.list_node().items) == 2
    cluster.advance(500)  # booking expired at 10 min, then 2 min unneeded
    assert cluster.conditions(cluster.request("gang"))["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    assert cluster.core.list_node().items == []
