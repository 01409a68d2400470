"""``reservation="workload"`` on the real kube-scheduler (v1.37, KEP-4671 gang scheduling) and on gang-sim.

Every test runs on both backends (gang-sim first, then the real control plane without Kueue) on
``scenarios/four-gpus.yaml``: four 1-GPU nodes that never grow. A *blocker* - a plain pod holding
one GPU - leaves room for three members.

- with room for 4: every member is bound, and the PodGroup's first scheduling outcome is
  ``True/Scheduled`` - the gang was placed in the one cycle that first tried it;
- a gang of 4 with room for 3: the scheduler binds none of them, the PodGroup says
  ``PodGroupInitiallyScheduled=False/Unschedulable`` and the try ends at its deadline; the fallback
  ladder's shrink step then makes a new PodGroup of ``minCount: 3``, which runs (one DAG run shows
  both, to keep the real tier short);
- a member failing tears the gang down, and a kill (``on_kill``'s delete targets) deletes a
  running gang's PodGroup and members: nothing of either is left.

Upstream: ``pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go`` and
``pkg/scheduler/schedule_one_podgroup.go`` (k8s.io/kubernetes v1.37.2); the PodGroup API,
``k8s.io/api scheduling/v1beta1/types.go``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_gang.hooks import creation, deletion
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import ShrinkTo
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance
from tests.real.backends import RealBackend, own_backend, wait_for
from tests.real.recording import recording
from tests.real.sequences import condition_transitions, pod_scheduled

pytestmark = pytest.mark.timeout(300)
SCENARIO = Path(__file__).with_name("scenarios") / "four-gpus.yaml"
POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
KINDS = ("v1/pods", "v1/configmaps", "v1/services", POD_GROUPS)
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
BLOCKER = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "gpu-blocker", "labels": {"app": "gpu-blocker"}},
    "spec": {
        "tolerations": [GPU_TOLERATION],
        "containers": [{"name": "hold", "image": "hold:sim", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    },
}
"""A pod holding one GPU node until deleted (no ``sim.gang.dev/run-seconds``: kwok and gang-sim keep it running)."""


@pytest.fixture(scope="module", params=["gang-sim", "real"])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The scenario's cluster on one backend, with the Airflow connection pointing at it."""
    with own_backend(request.param, SCENARIO) as cluster:
        yield cluster


def kubeconfig_of(backend: Any) -> str:
    return str(backend.cluster.kubeconfig_path if isinstance(backend, RealBackend) else backend.kubeconfig_path)


def gang_objects(backend: Any, prefix: str) -> dict[str, list[str]]:
    """Objects in ``default`` of the gangs whose name starts with ``prefix``, by kind."""
    found = {
        kind: [
            item["metadata"]["name"]
            for item in backend.objects(kind, label_selector=naming.GANG_LABEL)
            if item["metadata"]["labels"][naming.GANG_LABEL].startswith(naming.to_dns_label(prefix))
        ]
        for kind in KINDS
    }
    return {kind: names for kind, names in found.items() if names}


@pytest.fixture
def room_for_three(backend: Any) -> Iterator[None]:
    """One GPU node held by the blocker while the test runs."""
    backend.create("v1/pods", BLOCKER, "default")
    wait_for(
        lambda: all(
            pod["spec"].get("nodeName") for pod in backend.objects("v1/pods", label_selector="app=gpu-blocker")
        ),
        timeout=60,
        what="the blocker bound",
    )
    yield
    if isinstance(backend, RealBackend):
        backend.cluster.kubectl("delete", "pod", "gpu-blocker", "--grace-period=0", "--force")
    else:
        backend.run(lambda: backend.store.delete("v1/pods", "gpu-blocker", "default"))
    wait_for(lambda: not backend.objects("v1/pods", label_selector="app=gpu-blocker"), timeout=60, what="no blocker")


def workload_dag(dag_id: str, **arguments: Any) -> Any:
    options: dict[str, Any] = {
        "size": 4,
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(3),
        "reservation": "workload",
        "deferrable": True,
        "reservation_timeout": timedelta(minutes=2),
        "startup_timeout": timedelta(minutes=1),
    }
    options.update(arguments)
    return gang_dag(dag_id, **options)


def run_recorded(backend: Any, dag: Any) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    """Run ``dag`` recording pods and PodGroups; the run and the versions of its gangs', by kind.
    Waits until nothing of its gangs is left."""
    with recording(kubeconfig_of(backend), "v1/pods", POD_GROUPS) as seen:
        dag_run = run_dag_test(dag)
        wait_for(lambda: not gang_objects(backend, dag.dag_id), timeout=90, what=f"nothing of {dag.dag_id} left")
    prefix = naming.to_dns_label(dag.dag_id)
    versions = {
        kind: [
            obj
            for obj in recorder.named("")
            if (obj["metadata"].get("labels") or {}).get(naming.GANG_LABEL, "").startswith(prefix)
        ]
        for kind, recorder in seen.items()
    }
    return dag_run, versions


def per_object(versions: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    objects: dict[str, list[dict[str, Any]]] = {}
    for obj in versions:
        objects.setdefault(obj["metadata"]["uid"], []).append(obj)
    return objects


def members_of(versions: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    pods = [pod for pod in versions["v1/pods"] if pod["metadata"]["labels"].get(naming.ROLE_LABEL) == "member"]
    return per_object(pods)


def test_a_gang_of_four_with_room_for_four_binds_all_in_one_scheduling_cycle(backend: Any) -> None:
    dag_run, versions = run_recorded(backend, workload_dag("workload_room_for_four"))
    assert task_instance(dag_run).state == "success"
    assert (summary_of(dag_run)["reservation_mode"], summary_of(dag_run)["size_run"]) == ("workload", 4)
    members = members_of(versions)
    assert len(members) == 4 and all(any(pod["spec"].get("nodeName") for pod in pods) for pods in members.values())
    for name, pods in members.items():
        assert ("False", "Unschedulable") not in pod_scheduled(pods), (name, pod_scheduled(pods))
    (group,) = per_object(versions[POD_GROUPS]).values()
    assert condition_transitions(group)["PodGroupInitiallyScheduled"] == (("True", "Scheduled"),)


def test_a_gang_of_four_with_room_for_three_binds_none_and_the_shrink_step_gets_it_running(
    backend: Any, room_for_three: None
) -> None:
    dag = workload_dag(
        "workload_room_for_three",
        retries=1,
        min_size=3,
        fallbacks=[ShrinkTo(3)],
        reservation_timeout=timedelta(seconds=15),
    )
    dag_run, versions = run_recorded(backend, dag)
    first, second = summary_of(dag_run)["tries"]
    assert (first["size"], first["outcome"]) == (4, "deadline")
    assert (second["size"], second["step"], second["outcome"]) == (3, "shrink to 3 members", "all_succeeded")
    assert task_instance(dag_run).state == "success"
    groups = sorted(per_object(versions[POD_GROUPS]).values(), key=lambda group: group[0]["metadata"]["name"])
    assert [group[0]["spec"]["schedulingPolicy"]["gang"]["minCount"] for group in groups] == [4, 3]
    four, three = groups
    outcomes = condition_transitions(four).get("PodGroupInitiallyScheduled", ())
    assert ("False", "Unschedulable") in outcomes and ("True", "Scheduled") not in outcomes, outcomes
    assert condition_transitions(three)["PodGroupInitiallyScheduled"][-1] == ("True", "Scheduled")
    gang_of_four = {four[0]["metadata"]["name"]}
    members = members_of(versions)
    first_try = {
        uid: pods for uid, pods in members.items() if pods[0]["spec"]["schedulingGroup"]["podGroupName"] in gang_of_four
    }
    assert len(first_try) == 4, sorted(first_try)
    bound = [pod["metadata"]["name"] for pods in first_try.values() for pod in pods if pod["spec"].get("nodeName")]
    assert bound == [], f"members bound although the gang of 4 could not be placed whole: {bound}"


def test_a_member_failing_leaves_nothing(backend: Any, capfd: pytest.CaptureFixture[str]) -> None:
    dag_run, versions = run_recorded(
        backend, workload_dag("workload_member_fails", size=2, pod_template=simulated_pod(2, exit_code=1))
    )
    assert task_instance(dag_run).state == "failed"
    assert "member_failed" in capfd.readouterr().out
    assert len(per_object(versions[POD_GROUPS])) == 1


def test_a_kill_deletes_the_running_gang_and_its_pod_group(backend: Any) -> None:
    spec = GangSpec(
        name="workload-kill-t1-00000000",
        namespace="default",
        size=2,
        pod_template={"spec": {"tolerations": [GPU_TOLERATION], "containers": [{"name": "m", "image": "hold:sim"}]}},
        mode=ReservationMode.WORKLOAD,
        resources=MemberResources(gpus=1, cpu="1"),
    )
    settings = ConnectionSettings(kubeconfig=yaml.safe_load(Path(kubeconfig_of(backend)).read_text()))

    async def start() -> None:
        async with await ClientOptions().connect(settings) as client:
            await creation.ensure_reservation(client, spec, owner_try=1)

    async def kill() -> int:
        async with await ClientOptions().connect(settings) as client:
            return await deletion.delete_gang(client, "default", deletion.gang_targets(spec.name, spec.mode))

    asyncio.run(start())
    selector = f"{naming.GANG_LABEL}={spec.name},{naming.ROLE_LABEL}=member"

    def running() -> bool:
        pods = backend.objects("v1/pods", label_selector=selector)
        return len(pods) == 2 and all((pod.get("status") or {}).get("phase") == "Running" for pod in pods)

    wait_for(running, timeout=120, what=f"both members of {spec.name} running")
    assert set(gang_objects(backend, spec.name)) == {"v1/pods", "v1/configmaps", POD_GROUPS}
    # The owner's deletion lets the garbage collector race the member deletes (a 404 counts as
    # nothing deleted), so only "something" is certain here; what is left is checked next.
    assert asyncio.run(kill()) >= 1
    wait_for(lambda: not gang_objects(backend, spec.name), timeout=90, what=f"nothing of {spec.name} left")


def test_auto_reads_the_discovery_and_runs_the_gang_as_workload(
    backend: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """``reservation="auto"`` asks the apiserver's discovery (``/apis/scheduling.k8s.io/v1beta1``):
    both backends serve PodGroups, so the try runs as ``workload`` and creates a PodGroup."""
    dag_run, versions = run_recorded(backend, workload_dag("workload_auto", size=2, reservation="auto"))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], [item["mode"] for item in summary["tries"]]) == ("workload", ["workload"])
    assert "reservation='auto' chose 'workload' for try 1" in capfd.readouterr().out
    assert len(per_object(versions[POD_GROUPS])) == 1
