"""ProvisioningRequest mode on the real cluster-autoscaler: it grows the GPU pool for the gang,
``Provisioned=True``, the real scheduler binds every member to the new kwok nodes; a gang larger than
all the pools an on-demand gang may use can ever hold together (4 + 2 + 2 nodes, ``scenarios/gpu.yaml``)
is answered ``Provisioned=False/CapacityIsNotFound`` (retried by CA with backoff, never ``Failed``),
so the try ends at its reservation timeout and the ladder's next step (a smaller gang) runs.

Upstream: kubernetes-sigs/cluster-autoscaler ``pkg/provisioningrequest/besteffortatomic`` and
``checkcapacity``; the conditions' meaning in ``proposals/provisioning-request.md``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import ShrinkTo
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance

pytestmark = pytest.mark.timeout(600)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
SPOT_LABEL = "cloud.google.com/gke-spot"


def gpu_nodes(cluster: Any) -> list[dict[str, Any]]:
    """The GPU nodes an on-demand gang may use: all but the scenario's Spot node."""
    return [
        node
        for node in cluster.objects("v1/nodes", namespace="")
        if "nvidia.com/gpu" in node["status"]["capacity"] and SPOT_LABEL not in node["metadata"]["labels"]
    ]


def test_best_effort_atomic_grows_the_pool_and_the_gang_runs_on_the_new_nodes(cluster: Any) -> None:
    dag = gang_dag(
        "real_pr_atomic",
        size=3,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(5),
        reservation="provisioning_request",
        provisioning_class=ATOMIC,
        deferrable=True,
        reservation_timeout=timedelta(minutes=3),
        startup_timeout=timedelta(minutes=2),
    )
    dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], summary["size_run"]) == ("provisioning_request", 3)
    assert summary["exit_codes"] == {"0": 0, "1": 0, "2": 0}
    assert len(gpu_nodes(cluster)) >= 3


def test_a_gang_beyond_the_pool_is_not_found_and_the_ladder_shrinks_it(cluster: Any) -> None:
    dag = gang_dag(
        "real_pr_beyond_max",
        size=9,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(5),
        reservation="provisioning_request",
        provisioning_class=ATOMIC,
        deferrable=True,
        min_size=2,
        retries=1,
        fallbacks=[ShrinkTo(2)],
        reservation_timeout=timedelta(seconds=45),
        startup_timeout=timedelta(minutes=2),
    )
    dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    first, second = summary_of(dag_run)["tries"]
    assert first["size"] == 9 and first["outcome"] in {"deadline", "capacity_not_found"}, first
    assert (second["size"], second["step"], second["outcome"]) == (2, "shrink to 2 members", "all_succeeded"), second


def test_check_capacity_finds_the_nodes_already_there(cluster: Any) -> None:
    """After the pool has grown, check-capacity (no scale-up) books the free nodes: ``CapacityIsFound``."""
    if len(gpu_nodes(cluster)) < 2:
        grow = gang_dag(
            "real_pr_grow_for_check",
            size=2, gpus=1, cpu="1", pod_template=simulated_pod(2), reservation="provisioning_request",
            provisioning_class=ATOMIC, deferrable=True, reservation_timeout=timedelta(minutes=3),
        )  # fmt: skip
        assert task_instance(run_dag_test(grow)).state == "success"
    dag = gang_dag(
        "real_pr_check_capacity",
        size=2,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(3),
        reservation="provisioning_request",
        provisioning_class=CHECK_CAPACITY,
        deferrable=True,
        reservation_timeout=timedelta(minutes=2),
    )
    dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    assert summary_of(dag_run)["size_run"] == 2
    assert not cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests", label_selector=naming.GANG_LABEL)
