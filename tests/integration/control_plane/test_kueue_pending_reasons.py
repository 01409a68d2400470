"""Kueue 0.20 behaviour: typed QuotaReserved pending reasons, check states outranking Admitted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gang_sim.testing.pytest_plugin import SimCluster
from tests.integration.control_plane.conftest import gpu_scenario
from tests.integration.control_plane.kueue_setup import condition_map, create_job, setup_queues


def _quota_reserved(workload: dict[str, Any]) -> tuple[str, str, str]:
    found = next(c for c in workload["status"]["conditions"] if c["type"] == "QuotaReserved")
    return found["status"], found["reason"], found["message"]


def _by_job(cluster: SimCluster) -> dict[str, dict[str, Any]]:
    return {w["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-name"]: w for w in cluster.workloads()}


def test_pending_reason_tells_waiting_for_quota_from_exceeding_the_queue(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster, class_name=None, gpus=4)
    create_job(cluster, "first", count=3, run_seconds=100)
    cluster.advance(1)
    create_job(cluster, "second", count=2, run_seconds=100)
    create_job(cluster, "huge", count=6, run_seconds=100)
    cluster.advance(1)
    workloads = _by_job(cluster)
    assert _quota_reserved(workloads["first"])[:2] == ("True", "QuotaReserved")
    assert _quota_reserved(workloads["second"]) == (
        "False",
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor l4, "
        "1 more needed",
    )
    assert _quota_reserved(workloads["huge"]) == (
        "False",
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor l4, "
        "request > maximum capacity (6 > 4)",
    )
    cluster.advance(10 * 60)  # first finishes: second gets its quota, huge still cannot ever fit
    workloads = _by_job(cluster)
    assert _quota_reserved(workloads["second"])[:2] == ("True", "QuotaReserved")
    assert _quota_reserved(workloads["huge"])[1] == "ExceedsMaxQuota"


def test_a_rejected_check_is_never_beside_admitted_true(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(pool={"queuedProvisioning": True, "provisioningDelaySeconds": 60})
    cluster = sim_cluster(scenario)
    setup_queues(cluster, class_name="queued-provisioning.gke.io", parameters={"maxRunDurationSeconds": "1800"})
    seen: list[tuple[bool, set[str]]] = []

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource.endswith("/workloads"):
            admitted = any(
                c["type"] == "Admitted" and c["status"] == "True"
                for c in (obj.get("status") or {}).get("conditions", [])
            )
            seen.append((admitted, {c["state"] for c in (obj.get("status") or {}).get("admissionChecks") or []}))

    cluster.harness.run(lambda: cluster.harness.store.subscribe(record))
    create_job(cluster, run_seconds=100_000)
    cluster.advance(90)
    (workload,) = cluster.workloads()
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(31 * 60)  # maxRunDurationSeconds: CapacityRevoked -> Rejected -> deactivated
    workload = cluster.kueue("workloads", workload["metadata"]["name"], "default")
    assert workload["status"]["admissionChecks"][0]["state"] == "Rejected"
    assert (True, {"Ready"}) in seen and any("Rejected" in states for _, states in seen)
    assert not [states for admitted, states in seen if admitted and states & {"Rejected", "Retry"}]
