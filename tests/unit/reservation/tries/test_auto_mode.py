"""``reservation.tries.auto_mode.choose``: a new ``auto`` plan runs as ``workload`` where PodGroups
are served, else as the ``gates`` plan it was made as; the sentence says which and why."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryPlan
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.tries import auto_mode
from tests.builders import gang_spec


def gates_plan() -> TryPlan:
    spec = gang_spec(mode=ReservationMode.GATES, provisioning_parameters={"noRetry": "true"}, zone="zone-a")
    return TryPlan(
        attempt=2,
        gang="gang-t2-abc",
        step="other zone zone-a",
        step_index=0,
        spec=spec,
        requested_at=100.0,
        reservation_deadline=400.0,
        deadline_reason=Reason.DEADLINE,
        start_deadline=None,
    )


def test_pod_groups_served_turn_the_plan_into_a_workload_plan_without_a_request() -> None:
    plan = gates_plan()
    chosen, why = auto_mode.choose(plan, pod_groups_served=True, conn_id="gpu-east")
    assert chosen.spec.mode is ReservationMode.WORKLOAD
    assert (chosen.spec.provisioning_class, dict(chosen.spec.provisioning_parameters)) == (None, {})
    assert chosen.spec.zone == "zone-a" and chosen.spec.size == plan.spec.size
    assert dataclasses.replace(chosen, spec=plan.spec) == plan  # nothing else of the plan changes
    assert why.startswith("reservation='auto' chose 'workload' for try 2: cluster 'gpu-east' serves")


def test_without_pod_groups_the_gates_plan_stays() -> None:
    plan = gates_plan()
    chosen, why = auto_mode.choose(plan, pod_groups_served=False, conn_id="gpu-west")
    assert chosen is plan
    assert why.startswith("reservation='auto' chose 'gates' for try 2: cluster 'gpu-west' does not serve")


def test_pod_groups_without_their_topology_constraint_keep_the_gates_plan_of_a_topology_gang() -> None:
    plan = gates_plan()
    plan = dataclasses.replace(plan, spec=dataclasses.replace(plan.spec, required_topology="rack"))
    chosen, why = auto_mode.choose(plan, pod_groups_served=True, conn_id="gpu-east", topology_served=False)
    assert chosen == plan
    assert "drops their topology constraint (feature gate TopologyAwareWorkloadScheduling off)" in why
    served, _ = auto_mode.choose(plan, pod_groups_served=True, conn_id="gpu-east", topology_served=True)
    assert served.spec.mode is ReservationMode.WORKLOAD and served.spec.required_topology == "rack"


def test_only_a_plan_in_the_configured_mode_chooses() -> None:
    workload, _ = auto_mode.choose(gates_plan(), pod_groups_served=True, conn_id="c")
    with pytest.raises(ValueError, match="only a plan in 'gates' mode chooses, not 'workload'"):
        auto_mode.choose(workload, pod_groups_served=False, conn_id="c")
