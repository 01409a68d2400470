"""``reservation="workload"`` (Kubernetes' own gang scheduling, KEP-4671) end to end on gang-sim.

The emulator serves ``scheduling.k8s.io/v1beta1`` PodGroups and its scheduler places a gang's
``minCount`` members at once or none (``gang_sim.controllers.gang_scheduling``); the real-tier twin of
these tests is ``tests/real/test_workload_api.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_provider_gang.reservation.fallback import OtherZone
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance
from tests.e2e.test_fallbacks import TWO_ZONES

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"


def test_workload_gang_succeeds(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(
        "workload_success",
        size=4,
        gpus=1,
        pod_template=simulated_pod(60),
        reservation="workload",
        deferrable=True,
        reservation_timeout=timedelta(seconds=600),
        startup_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], summary["size_run"]) == ("workload", 4)
    assert cluster.objects("v1/pods") == []
    assert cluster.objects(POD_GROUPS) == []


def test_a_gang_unschedulable_in_zone_a_runs_in_zone_b_after_its_deadline(cluster_factory: Any, run_dag: Any) -> None:
    """Zone A has no GPU node and cannot get one: try 1's PodGroup stays ``Unschedulable`` and binds
    no member until its deadline; ``OtherZone`` gives try 2 a new PodGroup whose members bind in zone B."""
    cluster = cluster_factory(TWO_ZONES, time_scale=60)
    bound: dict[str, str] = {}

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "v1/pods" and (obj.get("spec") or {}).get("nodeName"):
            bound[obj["metadata"]["name"]] = obj["spec"]["nodeName"]

    cluster.run(lambda: cluster.store.subscribe(record))
    dag = gang_dag(
        "workload_zone_fallback",
        retries=1,
        size=4,
        gpus=1,
        pod_template=simulated_pod(20),
        reservation="workload",
        zone="zone-a",
        strict_zone=True,
        fallbacks=[OtherZone("zone-b")],
        deferrable=True,
        reservation_timeout=timedelta(seconds=10),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    first, second = summary["tries"]
    assert (first["step"], first["outcome"]) == ("as configured", "deadline")
    assert (second["step"], second["outcome"], second["mode"]) == ("other zone zone-b", "all_succeeded", "workload")
    assert not [pod for pod in bound if pod.startswith(f"{first['gang']}-")]  # nothing of try 1 was placed
    assert len([pod for pod in bound if pod.startswith(f"{second['gang']}-")]) == 4
    assert cluster.objects(POD_GROUPS) == [] and cluster.objects("v1/pods") == []


def test_a_cluster_without_the_pod_group_api_is_refused_naming_the_gate_and_gates(
    cluster_factory: Any, run_dag: Any, capfd: Any
) -> None:
    cluster = cluster_factory("small", time_scale=60, serve_workload_api=False)
    dag = gang_dag("workload_not_served", size=2, gpus=1, pod_template=simulated_pod(5), reservation="workload")
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "failed"
    out = capfd.readouterr().out
    assert "does not serve podgroups.scheduling.k8s.io/v1beta1" in out
    assert "GenericWorkload=true" in out and "reservation='gates'" in out
    assert (
        cluster.objects("v1/pods") == []
        and cluster.objects("v1/configmaps", label_selector="airflow-gang.io/gang") == []
    )
