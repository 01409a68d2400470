"""Gates mode on the real kube-scheduler, and a gang's teardown on the real control plane.

- gates: the members are created with the gang's scheduling gate; the real scheduler leaves them
  ``PodScheduled=False`` reason ``SchedulingGated`` and unbound until the provider removes the gate
  once the ProvisioningRequest is ``Provisioned``; then every member binds and runs;
- a member failing (kwok's exit stage: ``sim.gang.dev/exit-code: "1"``, written on one running
member, :func:`tests.real.members.member_exits`) fails the try and the operator tears the gang
down: the members still running are deleted (the apiserver marks them, the kubelet's stand-in stops
them - ``Failed``, exit code 143 - and removes them), nothing of the gang is left;
- the owner ConfigMap deleted (what ``on_kill`` and any cleanup does): kube-controller-manager's
  garbage collector deletes every object the gang's ownerReferences chain to it - members, headless
  Service, PodTemplate and ProvisioningRequest; Kueue's Job, its pods and its Workload.

Upstream: scheduling readiness, https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/
(``pkg/scheduler/framework/plugins/schedulinggates``); garbage collection,
https://kubernetes.io/docs/concepts/architecture/garbage-collection/ (``pkg/controller/garbagecollector``).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import timedelta
from typing import Any

import pytest
import yaml

from airflow_provider_gang.hooks import creation
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.spec import Distributed, GangSpec, MemberResources, ReservationMode
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, task_instance
from tests.real.backends import RealBackend, wait_for
from tests.real.members import RUNS_UNTIL_DELETED, Exit, gang_leftovers, member_exits, nothing_left, of_gangs
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(300)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
TOLERATING_GPU_TAINT = {
    "spec": {
        **RUNS_UNTIL_DELETED["spec"],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
}
"""The same with the GPU pool's taint tolerated, as the operator's member template adds
(``operators.member_template``) for a gang built here from a :class:`GangSpec`."""


def member_versions(versions: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Recorded versions of gang members, by pod name, oldest first."""
    members: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in versions:
        if (pod["metadata"].get("labels") or {}).get(naming.ROLE_LABEL) == "member":
            members[pod["metadata"]["name"]].append(pod)
    return members


def gate_of(pod: dict[str, Any]) -> str:
    return naming.GangNames(pod["metadata"]["labels"][naming.GANG_LABEL]).scheduling_gate


def is_gated(pod: dict[str, Any]) -> bool:
    return any(entry.get("name") == gate_of(pod) for entry in pod["spec"].get("schedulingGates") or [])


def scheduled_condition(pod: dict[str, Any]) -> tuple[str, str] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return condition["status"], condition.get("reason", "")
    return None


def test_the_real_scheduler_holds_gated_members_until_the_release_binds_them_all(cluster: RealBackend) -> None:
    dag_id = "real_gates_release"
    dag = gang_dag(
        dag_id,
        size=3,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(5),
        reservation="gates",
        provisioning_class=ATOMIC,
        deferrable=True,
        reservation_timeout=timedelta(minutes=3),
        startup_timeout=timedelta(minutes=2),
    )
    with recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen:
        dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    members = member_versions(of_gangs(seen["v1/pods"].named(""), dag_id))
    assert len(members) == 3, sorted(members)
    for name, versions in members.items():
        gated = [pod for pod in versions if is_gated(pod)]
        assert gated, f"{name} was never seen gated"
        assert not any(pod["spec"].get("nodeName") for pod in gated), f"{name} was bound while gated"
        assert ("False", "SchedulingGated") in {scheduled_condition(pod) for pod in gated}, (
            f"the scheduler never marked {name} SchedulingGated: {[scheduled_condition(pod) for pod in gated]}"
        )
        bound = [pod for pod in versions if pod["spec"].get("nodeName")]
        assert bound, f"{name} was never bound after the release"
        assert scheduled_condition(bound[-1]) == ("True", ""), scheduled_condition(bound[-1])
        phases = [(pod.get("status") or {}).get("phase") for pod in versions]
        assert "Succeeded" in phases, phases


def test_a_member_failing_tears_the_gang_down(cluster: RealBackend, capfd: pytest.CaptureFixture[str]) -> None:
    dag_id = "real_member_fails"
    dag = gang_dag(
        dag_id,
        size=2,
        gpus=1,
        cpu="1",
        pod_template=RUNS_UNTIL_DELETED,
        reservation="gates",
        provisioning_class=ATOMIC,
        deferrable=True,
        reservation_timeout=timedelta(minutes=3),
        startup_timeout=timedelta(minutes=2),
        run_timeout=timedelta(minutes=3),
    )
    with recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen:
        with member_exits(cluster, dag_id, [Exit(attempt=1, rank=1, code=1)]):
            dag_run = run_dag_test(dag)
        nothing_left(cluster, dag_id, timeout=60)
    assert task_instance(dag_run).state == "failed"
    assert "member_failed" in capfd.readouterr().out
    members = member_versions(of_gangs(seen["v1/pods"].named(""), dag_id))
    phases = {name: [(pod.get("status") or {}).get("phase") for pod in versions] for name, versions in members.items()}
    by_rank = {versions[0]["metadata"]["labels"][naming.RANK_LABEL]: name for name, versions in members.items()}
    assert "Failed" in phases[by_rank["1"]], phases
    survivor = members[by_rank["0"]]
    running = [
        (pod.get("status") or {}).get("phase") for pod in survivor if not pod["metadata"].get("deletionTimestamp")
    ]
    assert "Failed" not in running and "Succeeded" not in running, phases
    assert survivor[-1]["metadata"].get("deletionTimestamp"), "the running member was not deleted by the teardown"
    # marked, it stops as on SIGTERM (the kubelet's part, kwok's gang-member-stop stage) before it is removed
    assert (survivor[-1].get("status") or {}).get("phase") == "Failed", phases


def gc_spec(mode: ReservationMode) -> GangSpec:
    common: dict[str, Any] = {
        "namespace": "default",
        "size": 2,
        "pod_template": TOLERATING_GPU_TAINT,
        "mode": mode,
        "resources": MemberResources(gpus=1, cpu="1"),
    }
    if mode is ReservationMode.KUEUE:
        return GangSpec(name="real-gc-kueue-t1-00000000", queue="team", **common)
    return GangSpec(name="real-gc-pr-t1-00000000", provisioning_class=ATOMIC, distributed=Distributed.TORCH, **common)


async def start_gang(cluster: RealBackend, spec: GangSpec) -> None:
    settings = ConnectionSettings(kubeconfig=yaml.safe_load(cluster.cluster.kubeconfig_path.read_text()))
    async with await ClientOptions().connect(settings) as client:
        made = await creation.ensure_reservation(client, spec, owner_try=1)
        await creation.launch(client, spec, size=spec.size, owner_uid=made.owner_uid)


@pytest.mark.parametrize(
    "mode", [ReservationMode.PROVISIONING_REQUEST, ReservationMode.KUEUE], ids=lambda mode: mode.value
)
def test_deleting_the_owner_config_map_garbage_collects_the_gang(cluster: RealBackend, mode: ReservationMode) -> None:
    spec = gc_spec(mode)
    asyncio.run(start_gang(cluster, spec))
    member = f"{naming.GANG_LABEL}={spec.name},{naming.ROLE_LABEL}=member"

    def running() -> bool:
        pods = cluster.objects("v1/pods", label_selector=member)
        return len(pods) == 2 and all((pod.get("status") or {}).get("phase") == "Running" for pod in pods)

    wait_for(running, timeout=180, what=f"both members of {spec.name} running")
    before = gang_leftovers(cluster, spec.name)
    expected = {"v1/pods", "v1/configmaps"} | (
        {"batch/v1/jobs"}
        if mode is ReservationMode.KUEUE
        else {"v1/services", "v1/podtemplates", "autoscaling.x-k8s.io/v1/provisioningrequests"}
    )
    assert set(before) == expected, before
    workloads = workloads_of_jobs(cluster, before.get("batch/v1/jobs", []))
    assert len(workloads) == (1 if mode is ReservationMode.KUEUE else 0), workloads
    selector = f"{naming.GANG_LABEL}={spec.name},{naming.ROLE_LABEL}=owner"
    owners = cluster.objects("v1/configmaps", label_selector=selector)
    assert [owner["metadata"]["name"] for owner in owners] == [naming.GangNames(spec.name).owner]
    cluster.cluster.kubectl("delete", "configmap", owners[0]["metadata"]["name"], "--wait=false")

    def collected() -> bool:
        left = {name for item in cluster.objects(WORKLOADS) if (name := item["metadata"]["name"]) in workloads}
        return not gang_leftovers(cluster, spec.name) and not left

    wait_for(collected, timeout=120, what=f"the garbage collector deleting {spec.name}")


def workloads_of_jobs(cluster: RealBackend, jobs: list[str]) -> set[str]:
    """Kueue's Workloads owned by the Jobs named ``jobs`` (they carry Kueue's labels, not the gang's)."""
    return {
        item["metadata"]["name"]
        for item in cluster.objects(WORKLOADS)
        if any(
            reference["kind"] == "Job" and reference["name"] in jobs
            for reference in item["metadata"].get("ownerReferences") or []
        )
    }
