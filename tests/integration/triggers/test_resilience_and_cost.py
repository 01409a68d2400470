"""Triggers under a misbehaving API server (emulator faults), and what a wait costs in requests."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from airflow_provider_gang.kube.resources import CONFIG_MAPS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.apiserver.http.auth import Rule
from gang_sim.testing.eventually import eventually_async

from .gangs import Gang, condition, first_event, gang_spec, until_watching

PR = ReservationMode.PROVISIONING_REQUEST
GRANTED = (condition("Accepted"), condition("Provisioned"))


@pytest.mark.parametrize("code", [429, 500, 503])
async def test_reservation_is_still_decided_through_an_error_storm(sim, client, connection, code):
    """Half the trigger's LISTs and WATCHes fail and every watch is cut after 0.1 s, for the whole wait;
    the test's own status write (a PATCH) is spared so the outcome is known."""
    gang = await Gang(client, gang_spec(PR)).create()
    sim.set_faults(f"list:0.5:{code},watch:0.5:{code},watch-cut:0.1,seed:11")
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection))
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await eventually_async(  # the storm reaches the trigger's requests before the grant
        lambda: sim.metrics()["codes"].get(str(code), 0) >= 3, timeout=10, what=f"three {code} answers"
    )
    await gang.set_request_conditions(*GRANTED)
    event = await task
    assert (event["phase"], event["reason"]) == ("reserved", "reserved")


async def test_run_trigger_sees_changes_made_while_its_watch_was_cut(sim, client, connection):
    gang = await Gang(client, gang_spec(PR, size=4)).create(members=True)
    sim.set_faults("watch-cut:0.1")
    trigger = GangRunTrigger(**gang.run_kwargs(connection))
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    for rank in range(4):
        await sim.until_a_watch_ends()  # each change is written after a cut
        await gang.set_member_phase(rank, "Succeeded", exit_code=0)
    event = await task
    assert event["reason"] == "all_succeeded"
    assert sum(reflector.stats.reconnects for reflector in trigger.reflectors) >= 1
    assert all(reflector.stats.lists == 1 for reflector in trigger.reflectors)


@pytest.mark.emulator(history_limit=2)
async def test_reservation_trigger_relists_when_its_version_is_gone(sim, client, connection):
    gang = await Gang(client, gang_spec(ReservationMode.GATES, size=4)).create()
    sim.set_faults("watch-cut:0.2")
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection))
    # More writes than the (tiny) history keeps, then a watch cut: resuming from the last seen
    # versions gets 410 Gone, and the trigger lists again before it sees the grant.
    events = trigger.run()
    first = asyncio.ensure_future(anext(events))
    await until_watching(trigger)
    for index in range(4):
        await client.create(
            CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"noise-{index}"}}
        )
    await sim.until_a_watch_ends()  # past the next cut
    await gang.set_request_conditions(*GRANTED)
    event = (await asyncio.wait_for(first, 30)).payload
    await events.aclose()
    await trigger.cleanup()
    assert event["reason"] == "reserved"
    assert sum(reflector.stats.relists for reflector in trigger.reflectors) >= 1


async def test_forbidden_watch_ends_with_reason_invalid_and_the_api_error(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()
    _, path = sim.harness.add_user("no-crds", [Rule.parse("*::*")])  # core group only
    restricted = ConnectionSettings(kubeconfig=yaml.safe_load(path.read_text())).to_dict()
    event = await first_event(ReservationTrigger(**gang.reservation_kwargs(restricted)))
    assert (event["phase"], event["reason"], event["status"]) == ("failed", "invalid", "failure")
    assert event["api_error"] == {"type": "Forbidden", "code": 403}


async def test_a_gang_of_eight_waiting_ten_minutes_costs_a_handful_of_requests(sim, client, connection):
    """Scaled time: every timer of the trigger is divided by 100 (10 min -> 6 s, 5 min watches -> 3 s),
    so the request count equals that of a real 10-minute wait with 5-minute watches."""
    gang = await Gang(client, gang_spec(ReservationMode.GATES, size=8)).create()
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned", "False", reason="Pending"))
    sim.reset_metrics()
    kwargs = gang.reservation_kwargs(connection, deadline_in=6.0)
    kwargs["watch_timeout_seconds"] = 3
    event = await first_event(ReservationTrigger(**kwargs), timeout=30)
    assert event["reason"] == "deadline"
    metrics = sim.metrics()
    # Two kinds (the request, the 8 gated pods): one LIST each at the start and one each at the
    # deadline (decided on a fresh read), one WATCH per 5 (scaled) minutes each.
    assert metrics["requests"]["list"] == {"provisioningrequests.autoscaling.x-k8s.io": 2, "pods": 2}
    assert sum(metrics["requests"]["watch"].values()) <= 2 * 3
    assert metrics["total"] <= 10
