"""ReservationTrigger against the emulator, for each mode and each way a reservation ends.

The test plays the controllers (cluster-autoscaler, Kueue) by writing status conditions through the
API, before the trigger starts (seen by its LIST) or while it watches (seen by its WATCH).
"""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from airflow_provider_gang.kube.errors import NotFound
from airflow_provider_gang.kube.resources import CONFIG_MAPS, PODS
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.testing.eventually import eventually_async

from .gangs import Gang, condition, first_event, gang_spec, until_watching

PR = ReservationMode.PROVISIONING_REQUEST


async def wait_while(gang: Gang, connection, write, **kwargs):
    """Start a trigger, let it watch, then apply ``write``; return its event."""
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection, **kwargs))
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await write()
    return await task


@pytest.mark.parametrize(
    ("conditions", "phase", "reason"),
    [
        pytest.param([condition("Accepted"), condition("Provisioned")], "reserved", "reserved", id="granted"),
        pytest.param(
            [
                condition("Accepted"),
                condition("Provisioned", "False"),
                condition("Failed", reason="CapacityIsNotFound"),
            ],
            "failed",
            "capacity_not_found",
            id="refused-capacity-not-found",
        ),
        pytest.param(
            [condition("Accepted"), condition("Failed", reason="Expired")],
            "failed",
            "provisioning_failed",
            id="refused-other",
        ),
        pytest.param(
            [condition("Provisioned"), condition("BookingExpired", reason="BookingExpired")],
            "failed",
            "booking_expired",
            id="booking-expired",
        ),
        pytest.param(
            [condition("Provisioned"), condition("CapacityRevoked")],
            "failed",
            "capacity_revoked",
            id="capacity-revoked",
        ),
    ],
)
async def test_provisioning_request_outcomes_seen_through_the_watch(sim, client, connection, conditions, phase, reason):
    gang = await Gang(client, gang_spec(PR)).create()
    event = await wait_while(gang, connection, lambda: gang.set_request_conditions(*conditions))
    assert (event["phase"], event["reason"], event["stage"], event["mode"]) == (phase, reason, "reservation", PR.value)
    assert event["status"] == ("success" if phase == "reserved" else "failure")
    assert event["terminal"] is True
    assert event["timings"]["waited_seconds"] >= 0
    assert phase in event["timings"]["phases"]


async def test_accepted_is_not_an_answer_and_the_own_deadline_ends_the_wait(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned", "False", reason="Pending"))
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=1.0))
    event = await first_event(trigger)
    assert (event["phase"], event["reason"], event["status"]) == ("failed", "deadline", "failure")
    assert "deadline" in event["message"]
    assert event["timings"]["phases"]["pending"] <= event["timings"]["event_at"]


async def test_granted_before_the_trigger_starts_is_seen_by_its_list(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned"))
    event = await first_event(ReservationTrigger(**gang.reservation_kwargs(connection)))
    assert (event["phase"], event["reason"]) == ("reserved", "reserved")


async def test_the_client_is_closed_before_the_event_as_dag_test_never_cleans_up(sim, client, connection):
    """``dag.test()`` takes the first event with ``anext(trigger.run())`` and never calls ``cleanup()``
    (Airflow 3.3.2): nothing may be left for the garbage collector to report as unclosed."""
    gang = await Gang(client, gang_spec(PR)).create()
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned"))
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection))
    events = trigger.run()
    event = await asyncio.wait_for(anext(events), 30)
    assert event.payload["reason"] == "reserved"
    del events, trigger
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    assert [str(warning.message) for warning in caught if warning.category is ResourceWarning] == []


async def test_request_deleted_under_the_trigger_ends_with_reservation_gone(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    from airflow_provider_gang.kube.resources import PROVISIONING_REQUESTS

    event = await wait_while(
        gang, connection, lambda: client.delete(PROVISIONING_REQUESTS, gang.names.provisioning_request)
    )
    assert event["reason"] == "reservation_gone"


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param(
            {
                "admissionChecks": [
                    {
                        "name": "prov",
                        "state": "Retry",
                        "message": "capacity not found",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
            "kueue_retry",
            id="kueue-retry",
        ),
        pytest.param(
            {
                "admissionChecks": [
                    {"name": "prov", "state": "Rejected", "message": "no", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            },
            "kueue_rejected",
            id="kueue-rejected",
        ),
    ],
)
async def test_kueue_admission_check_failures(sim, client, connection, status, reason):
    gang = await Gang(client, gang_spec(ReservationMode.KUEUE)).create()
    quota = {"conditions": [condition("QuotaReserved")], **status}
    event = await wait_while(gang, connection, lambda: gang.set_workload_status(quota))
    assert (event["phase"], event["reason"], event["mode"]) == ("failed", reason, "kueue")


async def test_kueue_partial_admission_reports_the_admitted_count(sim, client, connection):
    gang = await Gang(client, gang_spec(ReservationMode.KUEUE, size=8, min_size=4)).create()
    admitted = {
        "conditions": [condition("QuotaReserved"), condition("Admitted")],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 6}]},
    }
    event = await wait_while(gang, connection, lambda: gang.set_workload_status(admitted))
    assert (event["phase"], event["reason"], event["admitted_count"]) == ("reserved", "reserved", 6)


async def test_gates_mode_waits_for_the_request_and_every_gated_member(sim, client, connection):
    gang = await Gang(client, gang_spec(ReservationMode.GATES, size=4)).create()
    event = await wait_while(
        gang, connection, lambda: gang.set_request_conditions(condition("Accepted"), condition("Provisioned"))
    )
    assert (event["phase"], event["reason"]) == ("reserved", "reserved")


async def test_gates_mode_a_gated_member_deleted_is_a_lost_member(sim, client, connection):
    gang = await Gang(client, gang_spec(ReservationMode.GATES, size=4)).create()
    event = await wait_while(gang, connection, lambda: client.delete(PODS, gang.names.member(2)))
    assert (event["phase"], event["reason"]) == ("failed", "member_lost")


async def test_two_copies_of_one_trigger_agree_and_write_nothing(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    kwargs = gang.reservation_kwargs(connection)
    first, second = ReservationTrigger(**kwargs), ReservationTrigger(**kwargs)
    tasks = [asyncio.create_task(first_event(first)), asyncio.create_task(first_event(second))]
    await until_watching(first)
    await until_watching(second)
    sim.reset_metrics()
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned"))
    events = await asyncio.gather(*tasks)
    assert [event["reason"] for event in events] == ["reserved", "reserved"]
    writes = {verb: count for verb, count in sim.metrics()["requests"].items() if verb not in ("get", "list", "watch")}
    assert writes == {"patch": {"provisioningrequests.autoscaling.x-k8s.io/status": 1}}  # the test's own write


def test_serialize_round_trips_plain_values(connection):
    kwargs = Gang(None, gang_spec(ReservationMode.GATES)).reservation_kwargs(connection)  # type: ignore[arg-type]
    classpath, stored = ReservationTrigger(**kwargs).serialize()
    assert classpath == "airflow_provider_gang.triggers.reservation.ReservationTrigger"
    import json

    assert json.loads(json.dumps(stored)) == stored
    assert ReservationTrigger(**stored).serialize() == (classpath, stored)


class DeferredTrigger(ReservationTrigger):
    """The task-instance state the Airflow API would report, fixed for the test."""

    state = "deferred"

    async def task_state(self) -> str:
        return self.state


async def test_on_kill_keeps_the_gang_while_the_task_is_still_deferred(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    trigger = DeferredTrigger(**gang.reservation_kwargs(connection))
    await trigger.on_kill()
    await trigger.cleanup()
    assert (await client.get(CONFIG_MAPS, gang.names.owner))["metadata"]["uid"] == gang.owner_uid


async def test_on_kill_after_a_user_action_deletes_the_gang_and_cleanup_deletes_nothing(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    kept = ReservationTrigger(**gang.reservation_kwargs(connection))
    await kept.cleanup()
    assert await client.get(CONFIG_MAPS, gang.names.owner)
    killed = DeferredTrigger(**gang.reservation_kwargs(connection))
    killed.state = "failed"
    await killed.on_kill()
    await killed.cleanup()
    assert await client.delete(CONFIG_MAPS, gang.names.owner) is False  # already gone


class SlowStateTrigger(ReservationTrigger):
    """Reads the task-instance state slowly (through the triggerer's channel it takes a while)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.state_asked = asyncio.Event()
        self.state_answer = asyncio.Event()

    async def task_state(self) -> str:
        self.state_asked.set()
        await self.state_answer.wait()
        return "failed"


async def test_on_kill_cancelled_again_still_deletes_the_gang(sim, client, connection):
    """Airflow 3.3.2's triggerer re-cancels a trigger about once a second until it has finished, also
    while its ``on_kill`` runs (seen under a real triggerer, tests/standalone): the deletion outlives it."""
    gang = await Gang(client, gang_spec(PR)).create()
    trigger = SlowStateTrigger(**gang.reservation_kwargs(connection))
    killing = asyncio.create_task(trigger.on_kill())
    await asyncio.wait_for(trigger.state_asked.wait(), 10)
    killing.cancel("__airflow_user_action__")
    with pytest.raises(asyncio.CancelledError):
        await killing
    await trigger.cleanup()  # what the triggerer does next; the deletion has a client of its own
    trigger.state_answer.set()

    async def owner_deleted() -> bool:
        try:
            await client.get(CONFIG_MAPS, gang.names.owner)
        except NotFound:
            return True
        return False

    await eventually_async(owner_deleted, timeout=10.0, what="the owner ConfigMap deleted")


class TaskInstanceOutsideATriggerer:
    """A task instance whose state cannot be read: no supervisor channel outside a triggerer."""

    dag_id, task_id, run_id, map_index = "dag", "train", "manual__1", -1


async def test_on_kill_keeps_the_gang_when_the_task_state_cannot_be_read(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection))
    trigger.task_instance = TaskInstanceOutsideATriggerer()
    assert await trigger.task_state() == "unknown"
    await trigger.on_kill()
    await trigger.cleanup()
    assert (await client.get(CONFIG_MAPS, gang.names.owner))["metadata"]["uid"] == gang.owner_uid
