"""A booking that expires before the members are created fails the try for a retry, on the real
cluster-autoscaler: its ProvisioningRequest processor sets ``BookingExpired=True`` with reason
``CapacityReservationTimeExpired`` ten minutes after ``Provisioned=True`` (a constant,
``defaultReservationTime`` in sigs.k8s.io/cluster-autoscaler ``pkg/processors/provreq/processor.go``).
The test does not wait ten minutes: it moves the ``Provisioned`` condition's ``lastTransitionTime``
eleven minutes back through the status subresource, a change from outside that the autoscaler reads
on its next loop exactly as it would read the passing of time.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.phases import Reason
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.real.backends import wait_for

pytestmark = pytest.mark.timeout(300)
REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"


def conditions(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {condition["type"]: condition for condition in request.get("status", {}).get("conditions", [])}


def age_provisioned(cluster: Any, request: dict[str, Any], minutes: int) -> None:
    """Move ``Provisioned``'s ``lastTransitionTime`` ``minutes`` back (status subresource, merge patch)."""
    moved = []
    for condition in request["status"]["conditions"]:
        if condition["type"] == "Provisioned":
            then = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=minutes)
            condition = {**condition, "lastTransitionTime": then.strftime("%Y-%m-%dT%H:%M:%SZ")}
        moved.append(condition)
    cluster.cluster.kubectl(
        "patch", "provisioningrequests.v1.autoscaling.x-k8s.io", request["metadata"]["name"], "-n", "default",
        "--subresource=status", "--type=merge", "-p", json.dumps({"status": {"conditions": moved}}),
    )  # fmt: skip


def test_a_booking_expired_before_launch_fails_the_try_and_launches_nothing(cluster: Any) -> None:
    op = GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(5),
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        deferrable=True,
        kubernetes_conn_id=cluster.conn_id,
    )
    context = context_for(FakeTaskInstance("real_booking", "run-1"))
    trigger = deferred(op.execute, context)
    event = first_event(trigger, timeout=180)
    assert event["reason"] == "reserved"
    (request,) = cluster.objects(REQUESTS, label_selector=naming.GANG_LABEL)
    age_provisioned(cluster, request, minutes=11)

    def expired() -> dict[str, Any] | None:
        (current,) = cluster.objects(REQUESTS, label_selector=naming.GANG_LABEL)
        booking = conditions(current).get("BookingExpired", {})
        return booking if booking.get("status") == "True" else None

    booking = wait_for(expired, timeout=60, what="the autoscaler's BookingExpired=True")
    assert booking["reason"] == "CapacityReservationTimeExpired"
    with pytest.raises(GangTryFailed) as caught:
        op.execute_reserved(context, event)
    assert caught.value.reason is Reason.BOOKING_EXPIRED
    assert cluster.objects("v1/pods", label_selector=naming.GANG_LABEL) == []
