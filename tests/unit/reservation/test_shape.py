"""Malformed objects are named by their field; missing fields and unknown condition types are not malformed."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation import shape
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.spec import ReservationMode


def pod(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "m-0", "namespace": "default"}, "spec": {"nodeName": "n1"}, "status": status}


@pytest.mark.parametrize(
    ("kind", "obj", "problem"),
    [
        pytest.param("Pod", pod(phase="Running"), None, id="well-formed"),
        pytest.param("Pod", {"metadata": {"name": "m-0"}}, None, id="no-status-is-not-malformed"),
        pytest.param(
            "ProvisioningRequest",
            {"metadata": {"name": "r"}, "status": {"conditions": [{"type": "SomethingNew", "status": "True"}]}},
            None,
            id="unknown-condition-type-is-fine",
        ),
        pytest.param(
            "ProvisioningRequest",
            {"metadata": {"name": "r"}, "status": {"conditions": "Provisioned"}},
            "ProvisioningRequest ?/r: status.conditions is a string, not a list",
            id="conditions-a-string",
        ),
        pytest.param(
            "Pod",
            pod(containerStatuses=[{"state": {"terminated": {"exitCode": "1"}}}]),
            "Pod default/m-0: status.containerStatuses[0].state.terminated.exitCode is a string, not an integer",
            id="exit-code-a-string",
        ),
        pytest.param(
            "Pod",
            pod(containerStatuses=[{"state": {"terminated": {"exitCode": True}}}]),
            "Pod default/m-0: status.containerStatuses[0].state.terminated.exitCode is a boolean, not an integer",
            id="exit-code-a-boolean",
        ),
        pytest.param(
            "Pod",
            pod(containerStatuses={"state": {}}),
            "Pod default/m-0: status.containerStatuses is an object, not a list",
            id="list-an-object",
        ),
        pytest.param(
            "Workload",
            {"metadata": {"name": "w"}, "spec": {"active": "yes"}},
            "Workload ?/w: spec.active is a string, not a boolean",
            id="active-a-string",
        ),
        pytest.param(
            "Workload",
            {"metadata": {"name": "w"}, "status": {"admission": {"podSetAssignments": [{"count": 2.5}]}}},
            "Workload ?/w: status.admission.podSetAssignments[0].count is float, not an integer",
            id="count-a-float",
        ),
        pytest.param(
            "Pod", {"metadata": "m-0"}, "Pod ?/?: metadata is a string, not an object", id="metadata-a-string"
        ),
        pytest.param("Pod", ["not", "an", "object"], "Pod ?/?: the object is list, not an object", id="not-an-object"),
    ],
)
def test_malformed_names_the_object_and_field(kind: str, obj: Any, problem: str | None) -> None:
    assert shape.malformed(kind, obj) == problem


def test_the_first_malformed_object_of_an_observation_is_named() -> None:
    request = {"metadata": {"name": "r", "namespace": "default"}, "status": {}}
    workload = {"metadata": {"name": "w", "namespace": "default"}, "status": {"admissionChecks": "none"}}
    observed = Observed(
        mode=ReservationMode.KUEUE,
        stage=Stage.RUN,
        size=1,
        started_at=0.0,
        provisioning_request=request,
        workload=workload,
        pods=(pod(phase=7),),
    )
    assert shape.malformed_in(observed) == "Workload default/w: status.admissionChecks is a string, not a list"
    readable = Observed(mode=ReservationMode.GATES, stage=Stage.RUN, size=1, started_at=0.0, pods=(pod(),))
    assert shape.malformed_in(readable) is None
    broken = Observed(mode=ReservationMode.GATES, stage=Stage.RUN, size=1, started_at=0.0, pods=(pod(phase=7),))
    assert shape.malformed_in(broken) == "Pod default/m-0: status.phase is an integer, not a string"


def test_an_item_rule_skips_a_field_that_is_not_a_list() -> None:
    assert shape.find_malformed({"items": "x"}, [("items[]", dict)]) is None  # the list rule's business
