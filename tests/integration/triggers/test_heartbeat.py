"""Waiting is never silent (``triggers.progress``): a waiting trigger logs every condition change of its
ProvisioningRequest or Workload with the condition's message, and a heartbeat - elapsed time, state,
try N of M, fallback step - whenever nothing was logged for ``heartbeat_seconds``.

A trigger logs through Airflow 3's structlog logger (``BaseTrigger.log``), which the triggerer binds
to the task log; ``structlog.testing.capture_logs`` (the ``logged`` fixture) sees what a task log would.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
import structlog

from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.progress import describe_elapsed
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.testing.eventually import eventually_async

from .gangs import Gang, condition, first_event, gang_spec, until_seen, until_watching

PR = ReservationMode.PROVISIONING_REQUEST


class Logged:
    """Log lines captured from structlog, formatted as the task log shows them."""

    def __init__(self, entries: list[MutableMapping[str, Any]]) -> None:
        self.entries = entries

    def lines(self) -> list[str]:
        return [str(entry["event"]) % tuple(entry.get("positional_args", ())) for entry in list(self.entries)]

    def of(self, gang: Gang) -> list[str]:
        return [line for line in self.lines() if line.startswith(f"Gang {gang.spec.name}")]

    async def wait_for(self, pattern: str, timeout: float = 10.0) -> str:
        """The first line matching ``pattern`` (regex), waiting for it up to ``timeout`` seconds."""

        def matching() -> str | None:
            return next((line for line in self.lines() if re.search(pattern, line)), None)

        try:
            return await eventually_async(
                matching, timeout=timeout, what=f"a log line matching {pattern!r}", interval=0.02
            )
        except AssertionError as error:
            raise AssertionError(f"{error}; got {self.lines()}") from error


@pytest.fixture
def logged() -> Iterator[Logged]:
    with structlog.testing.capture_logs() as entries:
        yield Logged(entries)


async def test_a_condition_change_logs_the_condition_message(sim, client, connection, logged):
    gang = await Gang(client, gang_spec(PR)).create()
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection), heartbeat_seconds=3600)
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await gang.set_request_conditions(
        condition("Accepted"),
        condition("Provisioned", "False", reason="Pending", message="waiting for 8 nodes in us-central1-b"),
    )
    line = await logged.wait_for("waiting for 8 nodes in us-central1-b")
    assert "Provisioned=False (Pending: waiting for 8 nodes in us-central1-b)" in line
    assert line.startswith(f"Gang {gang.spec.name}: pending after ")
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned", message="nodes are ready"))
    event = await task
    assert event["reason"] == "reserved"
    assert not any("still waiting" in line for line in logged.of(gang))  # changes, not heartbeats


async def test_heartbeats_name_elapsed_time_state_try_and_step_when_nothing_changes(
    sim, client, connection, logged, manual_time
):
    gang = await Gang(client, gang_spec(PR)).create()
    await gang.set_request_conditions(
        condition("Accepted"), condition("Provisioned", "False", reason="Pending", message="queued")
    )
    kwargs = gang.reservation_kwargs(connection, deadline_in=1000)
    trigger = ReservationTrigger(
        **kwargs, heartbeat_seconds=300, try_number=2, tries_allowed=3, step_description="other zone"
    )
    task = asyncio.create_task(first_event(trigger))
    await logged.wait_for(rf"Gang {gang.spec.name}: pending after 0 s")
    pattern = r"still waiting (\d+ min): ProvisioningRequest \S+ .*\(Pending: queued\); try 2 of 3, step 'other zone'$"
    for minutes in (5, 10, 15):
        manual_time.simulated.advance(300)
        await logged.wait_for(rf"still waiting {minutes} min")
    manual_time.simulated.advance(100)  # the deadline
    event = await task
    assert event["reason"] == "deadline"
    lines = logged.of(gang)
    heartbeats = [line for line in lines if "still waiting" in line]
    assert [re.search(pattern, line).group(1) for line in heartbeats] == ["5 min", "10 min", "15 min"], lines  # type: ignore[union-attr]
    assert len([line for line in lines if "pending after" in line]) == 1  # nothing changed after the first


async def test_a_run_heartbeats_while_members_start_and_is_silent_once_they_run(
    sim, client, connection, logged, manual_time
):
    gang = await Gang(client, gang_spec(PR, size=2)).create(members=True)
    trigger = GangRunTrigger(**gang.run_kwargs(connection, deadline_in=3600), heartbeat_seconds=60, try_number=1)
    task = asyncio.create_task(first_event(trigger))
    await logged.wait_for(rf"Gang {gang.spec.name}: starting after 0 s")
    manual_time.simulated.advance(60)
    await logged.wait_for(rf"Gang {gang.spec.name}: still waiting 1 min: .*; try 1$")
    for rank in range(2):
        await gang.set_member_phase(rank, "Running")

    for rank in range(2):
        await until_seen(trigger, gang.names.member(rank), "Running")
    await manual_time.read_again()  # the trigger decided on that view
    running_from = len(logged.lines())
    manual_time.simulated.advance(600)  # ten heartbeat intervals
    await manual_time.read_again()  # ... and looked at the clock after them
    assert not [line for line in logged.lines()[running_from:] if "still waiting" in line]
    for rank in range(2):
        await gang.set_member_phase(rank, "Succeeded", exit_code=0)
    assert (await task)["reason"] == "all_succeeded"


def test_the_progress_kwargs_default_and_survive_serialization(connection):
    gang = Gang(client=None, spec=gang_spec(PR))  # type: ignore[arg-type]
    plain = ReservationTrigger(**gang.reservation_kwargs(connection)).arguments
    assert (plain.heartbeat_seconds, plain.tries_allowed, plain.step_description) == (300.0, None, None)
    new = ReservationTrigger(
        **gang.reservation_kwargs(connection), heartbeat_seconds=60, tries_allowed=3, step_description="shrink to 4"
    )
    _, kwargs = new.serialize()
    rebuilt = ReservationTrigger(**kwargs).arguments
    assert (rebuilt.heartbeat_seconds, rebuilt.tries_allowed, rebuilt.step_description) == (60.0, 3, "shrink to 4")


@pytest.mark.parametrize(("seconds", "text"), [(12.4, "12 s"), (42 * 60 + 5, "42 min"), (125 * 60, "2 h 5 min")])
def test_elapsed_time_reads_as_a_person_would_say_it(seconds, text):
    assert describe_elapsed(seconds) == text


async def test_a_waiting_workload_logs_kueue_s_pending_reason_then_its_check_states(sim, client, connection, logged):
    gang = await Gang(client, gang_spec(ReservationMode.KUEUE, size=4)).create()
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection), heartbeat_seconds=3600)
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    full = (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor l4, "
        "2 more needed"
    )
    await gang.set_workload_status({"conditions": [condition("QuotaReserved", "False", "WaitingForQuota", full)]})
    line = await logged.wait_for("WaitingForQuota")
    assert f"waiting for quota: WaitingForQuota - {full} [Workload QuotaReserved=False" in line
    check = {"name": "prov", "state": "Pending", "message": "ETA 5m", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await gang.set_workload_status({"conditions": [condition("QuotaReserved")], "admissionChecks": [check]})
    line = await logged.wait_for("admission checks prov=Pending")
    assert line.endswith("admission checks prov=Pending (ETA 5m)]")
    await gang.set_workload_status(
        {
            "conditions": [condition("QuotaReserved"), condition("Admitted")],
            "admissionChecks": [{**check, "state": "Ready", "message": ""}],
        }
    )
    assert (await task)["reason"] == "reserved"
