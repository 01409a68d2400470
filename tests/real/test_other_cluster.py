"""Two real clusters: ``OtherCluster`` moves a gang from one to the other, and ``reservation="auto"``
chooses ``gates`` on the one that does not serve PodGroups.

The clusters are the emulator's ``OtherCluster`` pair (:mod:`tests.e2e.two_clusters`), each a real
control plane of its own without Kueue, started together once for the module: cluster A
(``kubernetes_default``) has no GPU node and cannot get one, so a check-capacity request with
``noRetry`` is answered ``Failed=True/CapacityIsNotFound`` by its autoscaler at once; cluster B
(``gang_cluster_b``) has four idle 1-GPU nodes and runs without the Workload / PodGroup API
(``RealCluster(workload_api=False)``: the ``GenericWorkload`` feature gate off, ``scheduling.k8s.io/
v1beta1`` not served). Nothing of any gang is left on either cluster after each test.

Upstream: sigs.k8s.io/cluster-autoscaler ``pkg/provisioningrequest/checkcapacity/provisioningclass.go``
(``noRetry``); KEP-4671 (the PodGroup API, beta in 1.37 behind ``GenericWorkload``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from functools import partial

import pytest

from demo.cluster import CONN_ID
from gang_sim.testing.real import RealCluster
from gang_sim.world.scenario import parse_scenario
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance
from tests.e2e.two_clusters import ARGUMENTS, B_CONN, FOUR_GPUS, NO_GPUS, QUICK
from tests.real.backends import RealBackend, airflow_connection, started_together, wait_for
from tests.real.conftest import GANG_KINDS, UNLABELLED_KINDS, leftovers
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(600)
REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
WITHOUT_KUEUE = (*(kind for kind in GANG_KINDS if kind not in UNLABELLED_KINDS), "v1/configmaps")
"""What a gang leaves on a cluster without Kueue (no Workload kind is served), its owner included."""


def no_gang_left(backend: RealBackend) -> bool:
    return not leftovers(backend, WITHOUT_KUEUE)


@pytest.fixture(scope="module")
def two_clusters() -> Iterator[tuple[RealBackend, RealBackend]]:
    """Cluster A and cluster B (module docstring), started together, with their Airflow connections."""
    first = RealCluster(parse_scenario(NO_GPUS), kueue=False)
    second = RealCluster(parse_scenario(FOUR_GPUS), kueue=False, workload_api=False)
    with (
        started_together(first, second),
        airflow_connection(first.kubeconfig_path, CONN_ID),
        airflow_connection(second.kubeconfig_path, B_CONN),
    ):
        yield RealBackend(first, CONN_ID), RealBackend(second, B_CONN)


@pytest.fixture
def clusters(two_clusters: tuple[RealBackend, RealBackend]) -> Iterator[tuple[RealBackend, RealBackend]]:
    """Both clusters; after the test, waits until nothing of a gang is left on either."""
    yield two_clusters
    for backend in two_clusters:
        wait_for(partial(no_gang_left, backend), timeout=90, what=f"no gang object left on {backend.conn_id}")


def test_a_stock_out_on_cluster_a_moves_the_gang_to_cluster_b(clusters: tuple[RealBackend, RealBackend]) -> None:
    cluster_a, _ = clusters
    dag = gang_dag("real_other_cluster", retries=1, pod_template=simulated_pod(3), deferrable=True, **ARGUMENTS)
    with recording(str(cluster_a.cluster.kubeconfig_path), REQUESTS) as on_a:
        dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    tries = [(item["step"], item["outcome"], item["kubernetes_conn_id"]) for item in summary_of(dag_run)["tries"]]
    assert tries == [
        ("as configured", "capacity_not_found", CONN_ID),
        (f"other cluster {B_CONN}", "all_succeeded", B_CONN),
    ]
    failed = [
        (condition["type"], condition["status"], condition["reason"])
        for request in on_a[REQUESTS].named("")
        for condition in (request.get("status") or {}).get("conditions") or []
    ]
    assert ("Failed", "True", "CapacityIsNotFound") in failed, failed


def test_auto_chooses_gates_where_pod_groups_are_not_served(
    clusters: tuple[RealBackend, RealBackend], capfd: pytest.CaptureFixture[str]
) -> None:
    _, cluster_b = clusters
    assert "podgroups" not in cluster_b.cluster.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name")
    dag = gang_dag(
        "real_auto_gates",
        size=2,
        gpus=1,
        pod_template=simulated_pod(3),
        reservation="auto",
        deferrable=True,
        reservation_timeout=timedelta(minutes=2),
        client_options=QUICK,
        kubernetes_conn_id=B_CONN,
    )
    with recording(str(cluster_b.cluster.kubeconfig_path), REQUESTS, "v1/pods") as seen:
        dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], [item["mode"] for item in summary["tries"]]) == ("gates", ["gates"])
    assert f"reservation='auto' chose 'gates' for try 1: cluster {B_CONN!r}" in capfd.readouterr().out
    assert seen[REQUESTS].named(""), "no ProvisioningRequest booked the nodes"
    gated = {pod["metadata"]["name"] for pod in seen["v1/pods"].named("") if pod["spec"].get("schedulingGates")}
    assert len(gated) == 2, gated
