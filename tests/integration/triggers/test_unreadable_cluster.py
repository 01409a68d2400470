"""Triggers facing an API server that does not answer, or answers what cannot be read (emulator faults).

A trigger decides nothing before its first successful LIST: a deadline that passes meanwhile waits
for that LIST instead of reading an empty view as "the reservation is gone". Malformed objects end
the try naming the object and the field; unknown condition types and a missing status do not.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog

from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger

from .gangs import Gang, condition, first_event, gang_spec, until_watching

PR = ReservationMode.PROVISIONING_REQUEST


async def test_a_deadline_passing_before_the_first_list_waits_for_that_list(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned", "False", reason="Pending"))
    sim.set_faults("list:1.0:503:for:1.5")  # every LIST fails for 1.5 s, past the client's retries
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=0.2))
    event = await first_event(trigger)
    assert (event["phase"], event["reason"]) == ("failed", "deadline")
    assert "no answer" not in event["message"]
    assert "accepted, waiting for capacity" in event["message"]  # decided on what it listed


async def test_an_api_server_that_never_answers_ends_the_wait_as_unreachable(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    sim.set_faults("list:1.0:503")
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=0.1), unreachable_seconds=0.5)
    started = time.monotonic()
    event = await first_event(trigger)
    assert (event["phase"], event["reason"], event["status"]) == ("failed", "cluster_unreachable", "failure")
    assert time.monotonic() - started >= 0.5
    assert trigger.serialize()[1]["unreachable_seconds"] == 0.5


@pytest.mark.parametrize(
    "fault", ["malformed/provisioningrequests:wrong-type", "malformed/provisioningrequests:wrong-type:count:1"]
)
async def test_a_malformed_object_ends_the_wait_naming_object_and_field(sim, client, connection, fault):
    gang = await Gang(client, gang_spec(PR)).create()
    await gang.set_request_conditions(condition("Accepted"))
    sim.set_faults(fault)
    event = await first_event(ReservationTrigger(**gang.reservation_kwargs(connection)))
    assert (event["phase"], event["reason"], event["status"]) == ("failed", "malformed_answer", "failure")
    assert f"ProvisioningRequest default/{gang.names.provisioning_request}" in event["message"]
    assert "status.conditions is a string, not a list" in event["message"]


@pytest.mark.parametrize("kind", ["unknown-condition", "no-status"])
async def test_unknown_conditions_and_a_missing_status_are_read_as_not_decided_yet(sim, client, connection, kind):
    gang = await Gang(client, gang_spec(PR)).create()
    sim.set_faults(f"malformed/provisioningrequests:{kind}:count:1")  # the trigger's LIST
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection))
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned"))
    event = await task
    assert (event["phase"], event["reason"]) == ("reserved", "reserved")


async def test_a_truncated_watch_line_is_a_reconnect_not_a_failure(sim, client, connection):
    gang = await Gang(client, gang_spec(PR, size=2)).create(members=True)
    sim.set_faults("malformed/pods:truncated-watch:count:2")
    trigger = GangRunTrigger(**gang.run_kwargs(connection))
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    for rank in range(2):
        await gang.set_member_phase(rank, "Succeeded", exit_code=0)
    event = await task
    assert event["reason"] == "all_succeeded"
    assert sum(reflector.stats.reconnects for reflector in trigger.reflectors) >= 1


async def test_a_startup_deadline_is_decided_on_a_fresh_list_not_on_a_stale_watch_cache(
    sim, client, connection, manual_time
):
    gang = await Gang(client, gang_spec(PR, size=2)).create(members=True)
    sim.set_faults("watch/pods:1.0:500:for:3")  # for 3 s the pods cache stays at the trigger's first LIST
    kwargs = gang.run_kwargs(connection, deadline_in=3600)
    kwargs["startup_deadline"] = manual_time.now() + 60
    trigger = GangRunTrigger(**kwargs, unreachable_seconds=60.0)
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)  # listed; its watches fail
    for rank in range(2):
        await gang.set_member_phase(rank, "Running")  # started after the LIST: only a fresh LIST sees it
    manual_time.simulated.advance(61)  # past the startup deadline
    await manual_time.read_again()  # the trigger decided the deadline (on a fresh LIST)
    assert not task.done()  # the startup deadline passed, but every member is running
    for rank in range(2):
        await gang.set_member_phase(rank, "Succeeded", exit_code=0)
    event = await task
    assert (event["phase"], event["reason"]) == ("succeeded", "all_succeeded")


async def test_a_fresh_list_failing_past_its_retries_leaves_the_deadline_decided_on_the_last_view(
    sim, client, connection
):
    gang = await Gang(client, gang_spec(PR, size=2)).create(members=True)
    kwargs = gang.run_kwargs(connection)
    kwargs["startup_deadline"] = time.time() + 1.0
    trigger = GangRunTrigger(**kwargs, unreachable_seconds=60.0)
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    with structlog.testing.capture_logs() as logged:
        sim.set_faults("list:1.0:503")  # the watches stream on; every LIST fails past the client's retries
        event = await task
    assert (event["phase"], event["reason"]) == ("failed", "deadline")
    assert "startup" in event["message"]
    assert any("could not read the gang afresh" in str(entry["event"]) for entry in logged), logged
