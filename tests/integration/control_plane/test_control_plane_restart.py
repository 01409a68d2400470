"""The cluster's control plane killed and started again (``ClusterHarness.restart_control_plane``).

The API server, the scheduler, the job controller, the cluster-autoscaler and Kueue come back with
empty memory; the Store, the nodes' kubelets and the cloud's machines are what survives, as they do
when a managed control plane is upgraded or its leader fails over. Each test stops the control plane
at a point where the lost memory would matter - nodes still booting, a queued scale-up issued but not
finished, a booking held - and checks through the API that nothing is created twice or forgotten.
"""

from __future__ import annotations

from collections.abc import Callable

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec, pod
from tests.integration.control_plane.conftest import dws_cluster, gpu_scenario
from tests.integration.control_plane.kueue_setup import condition_map, create_job, setup_queues

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
QUEUED = "queued-provisioning.gke.io"
RESIZE_LABEL = "autoscaling.gke.io/provisioning-request"


def cloud_nodes(cluster: SimCluster) -> list[str]:
    """The names of the machines the cloud runs (whether or not their Node registered)."""
    control = cluster.harness.control
    assert control is not None and control.running is not None
    cloud = control.running.plane.cloud
    names: list[str] = cluster.harness.run(lambda: sorted(record.name for record in cloud.live_nodes()))
    return names


def test_nodes_booting_through_a_restart_register_once(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 2, ATOMIC)
    cluster.advance(10)
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsProvisioned")
    booting = cloud_nodes(cluster)
    assert len(booting) == 2 and cluster.core.list_node().items == []  # 60 s to boot
    cluster.harness.restart_control_plane(down_seconds=0.2)
    cluster.advance(120)
    assert sorted(node.metadata.name for node in cluster.core.list_node().items) == booting
    assert cloud_nodes(cluster) == booting
    # The booking is held by the new autoscaler too: the request's own pods get the nodes.
    for index in range(2):
        body = pod(f"gang-{index}", spec=gpu_pod_spec())
        body["metadata"]["annotations"] = {"autoscaling.x-k8s.io/consume-provisioning-request": "gang"}
        cluster.core.create_namespaced_pod("default", body)
    cluster.advance(30)
    assert {p.spec.node_name for p in cluster.pods()} == set(booting)
    assert cluster.conditions(cluster.request("gang"))["BookingExpired"] == ("True", "CapacityBookingConsumed")


def test_a_queued_scale_up_in_flight_is_not_issued_again(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = dws_cluster(sim_cluster)
    cluster.create_request("dws-gang", "dws-worker", 2, QUEUED, parameters={"maxRunDurationSeconds": "3600"})
    cluster.advance(60)
    issued = cloud_nodes(cluster)
    assert len(issued) == 2 and cluster.core.list_node().items == []  # created, still booting
    assert "Provisioned" not in cluster.conditions(cluster.request("dws-gang"))
    cluster.harness.restart_control_plane(down_seconds=0.2)
    cluster.advance(120)
    request = cluster.request("dws-gang")
    assert cluster.conditions(request)["Provisioned"][0] == "True"
    resize = request["status"]["provisioningClassDetails"]["ResizeRequestName"]
    labelled = cluster.core.list_node(label_selector=f"{RESIZE_LABEL}={resize}").items
    assert sorted(node.metadata.name for node in labelled) == issued
    assert cloud_nodes(cluster) == issued  # the pool (4 nodes at most) was not grown again


def test_a_restarted_autoscaler_still_revokes_a_queued_request(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(pool={"name": "dws", "queuedProvisioning": True, "provisioningDelaySeconds": 60})
    cluster = sim_cluster(scenario)
    cluster.create_pod_template("dws-worker", gpu_pod_spec(nodeSelector={"cloud.google.com/gke-nodepool": "dws"}))
    cluster.create_request("dws-gang", "dws-worker", 2, QUEUED, parameters={"maxRunDurationSeconds": "1800"})
    cluster.advance(180)
    assert cluster.conditions(cluster.request("dws-gang"))["Provisioned"][0] == "True"
    assert len(cluster.core.list_node().items) == 2
    cluster.harness.restart_control_plane(down_seconds=0.2)
    cluster.advance(1800)
    assert cluster.conditions(cluster.request("dws-gang"))["CapacityRevoked"] == (
        "True",
        "MaxRunDurationSecondsReached",
    )
    assert cluster.core.list_node().items == [] and cloud_nodes(cluster) == []


def test_a_kueue_job_goes_on_through_two_restarts(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster)
    create_job(cluster)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert condition_map(workload)["QuotaReserved"] == ("True", "QuotaReserved")
    cluster.harness.restart_control_plane(down_seconds=0.2)  # the admission check's request just created
    cluster.advance(80)
    workload = cluster.kueue("workloads", name, "default")
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")
    assert [check["name"] for check in workload["status"]["admissionChecks"]] == ["prov"]
    requests = cluster.custom.list_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", "default", "provisioningrequests"
    )["items"]
    assert [request["metadata"]["name"] for request in requests] == [f"{name}-prov-1"]  # not a second attempt
    assert len(cluster.pods()) == 4 and len(cluster.core.list_node().items) == 4
    cluster.harness.restart_control_plane(down_seconds=0.2)  # the Job's pods running
    cluster.advance(320)
    assert condition_map(cluster.kueue("workloads", name, "default"))["Finished"] == ("True", "Succeeded")
    job = cluster.batch.read_namespaced_job("train", "default")
    assert job.status.succeeded == 4 and len(cluster.pods()) == 4  # no pod recreated
