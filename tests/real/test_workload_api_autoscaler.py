"""What the cluster-autoscaler does with a pending ``reservation="workload"`` gang (KEP-4671 PodGroup),
on the real cluster-autoscaler (kwok cloud provider) and on gang-sim's.

The autoscaler has no PodGroup support (kubernetes/autoscaler#8783, closed unimplemented; #9570:
"current code pretends that PodGroups don't exist"). Once every member exists, the kube-scheduler
tries the group, cannot place it, and marks each member ``PodScheduled=False/Unschedulable``; the
autoscaler then scales up for those pods as for any others. ``scenarios/two-gpu-pools.yaml`` has two
empty GPU pools of up to four nodes, one per zone, so each test grows its own:

- a gang of 3 that the pool can hold: the ordinary scale-up adds the nodes, the scheduler then places
  the whole group, and the try succeeds - the mode runs on an autoscaled pool;
- a gang of 6 that the pool can never hold: the autoscaler still adds every node it may (the pool
  grows to its maximum of 4), the scheduler binds no member, and the try ends at its deadline with
  four GPU nodes paid for and unused. A ProvisioningRequest (``gates`` mode) is answered
  ``CapacityIsNotFound`` before any node is added (``tests/real/test_provisioning_request.py``).

This is why ``workload`` mode is documented as all-or-nothing in binding only, and ``gates`` is the
mode to use when capacity must be booked at once (docs/workload-api.md).

Upstream: kubernetes/autoscaler ``cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go``
(scale-up for unschedulable pods, capped by the node group's max size);
``pkg/scheduler/schedule_one_podgroup.go`` (k8s.io/kubernetes v1.37.2).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gang_dags import summary_of, task_instance
from tests.real.backends import own_backend, wait_for
from tests.real.sequences import condition_transitions
from tests.real.test_workload_api import POD_GROUPS, members_of, per_object, run_recorded, workload_dag

pytestmark = pytest.mark.timeout(420)
SCENARIO = Path(__file__).with_name("scenarios") / "two-gpu-pools.yaml"
ZONE_LABEL = "topology.kubernetes.io/zone"
POOL_MAXIMUM = 4


@pytest.fixture(scope="module", params=["gang-sim", "real"])
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The scenario's cluster, with its autoscaler, on one backend; the Airflow connection points at it."""
    with own_backend(request.param, SCENARIO) as cluster:
        yield cluster


def gpu_nodes_in(backend: Any, zone: str) -> list[str]:
    return [
        node["metadata"]["name"]
        for node in backend.objects("v1/nodes", namespace="")
        if "nvidia.com/gpu" in node["status"].get("capacity", {}) and node["metadata"]["labels"].get(ZONE_LABEL) == zone
    ]


def test_the_autoscaler_grows_the_pool_for_a_pending_pod_group_and_the_gang_then_runs(backend: Any) -> None:
    zone = "us-central1-a"
    assert gpu_nodes_in(backend, zone) == []
    dag = workload_dag(
        "workload_autoscaled",
        size=3,
        zone=zone,
        strict_zone=True,
        reservation_timeout=timedelta(minutes=4),
        startup_timeout=timedelta(minutes=2),
    )
    dag_run, versions = run_recorded(backend, dag)
    assert task_instance(dag_run).state == "success", summary_of(dag_run)
    assert (summary_of(dag_run)["reservation_mode"], summary_of(dag_run)["size_run"]) == ("workload", 3)
    (group,) = per_object(versions[POD_GROUPS]).values()
    outcomes = condition_transitions(group)["PodGroupInitiallyScheduled"]
    assert outcomes[0] == ("False", "Unschedulable") and outcomes[-1] == ("True", "Scheduled"), outcomes
    nodes = set(gpu_nodes_in(backend, zone))
    assert len(nodes) >= 3
    bound_to = {
        pod["spec"]["nodeName"] for pods in members_of(versions).values() for pod in pods if pod["spec"].get("nodeName")
    }
    assert len(bound_to) == 3 and bound_to <= nodes, (bound_to, nodes)


def test_a_pod_group_beyond_the_pool_makes_the_autoscaler_add_nodes_that_no_member_uses(
    backend: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    zone = "us-central1-b"
    assert gpu_nodes_in(backend, zone) == []
    dag = workload_dag(
        "workload_beyond_pool",
        size=6,
        zone=zone,
        strict_zone=True,
        reservation_timeout=timedelta(seconds=40),  # both autoscalers add the nodes within 15 s
    )
    dag_run, versions = run_recorded(backend, dag)
    assert task_instance(dag_run).state == "failed"
    log = capfd.readouterr().out
    assert "failed (deadline)" in log and "0 of 6 members bound" in log, log[-4000:]
    bound = [
        pod["metadata"]["name"] for pods in members_of(versions).values() for pod in pods if pod["spec"].get("nodeName")
    ]
    assert bound == [], f"members bound although the gang of 6 could not be placed whole: {bound}"
    # The scale-up happened all the same, to the pool's maximum: not all or nothing.
    wait_for(
        lambda: len(gpu_nodes_in(backend, zone)) == POOL_MAXIMUM,
        timeout=60,
        what=f"the {zone} pool grown to its maximum of {POOL_MAXIMUM} nodes",
    )
