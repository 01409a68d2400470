"""GangRunTrigger against the emulator: the launched members watched as one unit."""

from __future__ import annotations

import asyncio
import json
import time

from airflow_provider_gang.kube.resources import CONFIG_MAPS, PODS
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger

from .gangs import Gang, condition, first_event, gang_spec, until_watching

PR = ReservationMode.PROVISIONING_REQUEST


async def launched(client, size: int = 4) -> Gang:
    return await Gang(client, gang_spec(PR, size=size)).create(members=True)


async def watch_while(gang: Gang, connection, write, **kwargs):
    trigger = GangRunTrigger(**gang.run_kwargs(connection, **kwargs))
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await write()
    return await task


async def test_all_members_succeeded(sim, client, connection):
    gang = await launched(client)

    async def finish_all():
        for rank in range(gang.spec.size):
            await gang.set_member_phase(rank, "Running")
        for rank in range(gang.spec.size):
            await gang.set_member_phase(rank, "Succeeded", exit_code=0)

    event = await watch_while(gang, connection, finish_all)
    assert (event["phase"], event["reason"], event["status"], event["stage"]) == (
        "succeeded",
        "all_succeeded",
        "success",
        "run",
    )
    assert [member["state"] for member in event["members"]] == ["succeeded"] * 4


async def test_member_failure_names_the_rank_and_why(sim, client, connection):
    gang = await launched(client)

    async def one_fails():
        for rank in range(gang.spec.size):
            await gang.set_member_phase(rank, "Running")
        await gang.set_member_phase(2, "Failed", exit_code=137, reason="OOMKilled")

    event = await watch_while(gang, connection, one_fails)
    assert (event["phase"], event["reason"]) == ("failed", "member_failed")
    failed = [member for member in event["members"] if member["state"] == "failed"]
    assert failed == [dict(failed[0], rank=2, exit_code=137, reason="OOMKilled")]
    assert failed[0]["pod_name"] == gang.names.member(2)


async def test_member_deleted_is_lost(sim, client, connection):
    gang = await launched(client)
    event = await watch_while(gang, connection, lambda: client.delete(PODS, gang.names.member(1)))
    assert (event["phase"], event["reason"]) == ("failed", "member_lost")


async def test_capacity_revoked_while_running_ends_the_run(sim, client, connection):
    gang = await launched(client)
    event = await watch_while(
        gang, connection, lambda: gang.set_request_conditions(condition("Provisioned"), condition("CapacityRevoked"))
    )
    assert event["reason"] == "capacity_revoked"


async def test_startup_deadline_fails_a_gang_that_never_all_runs(sim, client, connection):
    gang = await launched(client)
    await gang.set_member_phase(0, "Running")
    kwargs = gang.run_kwargs(connection)
    kwargs["startup_deadline"] = time.time() + 0.5
    event = await first_event(GangRunTrigger(**kwargs))
    assert (event["phase"], event["reason"]) == ("failed", "deadline")
    assert "startup" in event["message"]


async def test_own_deadline_ends_a_running_gang(sim, client, connection):
    gang = await launched(client)
    for rank in range(gang.spec.size):
        await gang.set_member_phase(rank, "Running")
    event = await first_event(GangRunTrigger(**gang.run_kwargs(connection, deadline_in=0.5)))
    assert (event["phase"], event["reason"]) == ("failed", "deadline")


def test_serialize_round_trips_plain_values(connection):
    kwargs = Gang(None, gang_spec(PR)).run_kwargs(connection)  # type: ignore[arg-type]
    kwargs["startup_deadline"] = 123.0
    classpath, stored = GangRunTrigger(**kwargs).serialize()
    assert classpath == "airflow_provider_gang.triggers.gang_run.GangRunTrigger"
    assert json.loads(json.dumps(stored)) == stored
    assert GangRunTrigger(**stored).serialize() == (classpath, stored)


class KilledByUser(GangRunTrigger):
    async def task_state(self) -> str:
        return "success"  # marked success by a user


async def test_on_kill_deletes_owner_and_members(sim, client, connection):
    gang = await launched(client)
    trigger = KilledByUser(**gang.run_kwargs(connection))
    await trigger.on_kill()
    await trigger.cleanup()
    assert await client.delete(CONFIG_MAPS, gang.names.owner) is False
    remaining, _ = await client.list(PODS, label_selector=gang.run_kwargs(connection)["pod_selector"])
    assert all(pod["metadata"].get("deletionTimestamp") for pod in remaining)


async def test_kueue_members_still_to_be_created_by_the_job_are_not_lost(sim, client, connection):
    from airflow_provider_gang.reservation.manifests import pods

    gang = await Gang(client, gang_spec(ReservationMode.KUEUE, size=4)).create()
    for rank in (0, 1):  # the Job controller has created two of four pods so far
        await client.create(PODS, pods.pod_group_pod(gang.spec, rank, owner_uid=gang.owner_uid))
        await gang.set_member_phase(rank, "Running")
    waiting = await first_event(GangRunTrigger(**gang.run_kwargs(connection, deadline_in=0.5)))
    assert waiting["reason"] == "deadline"
    assert [member["state"] for member in waiting["members"]] == ["running", "running", "missing", "missing"]
    explicit = gang.run_kwargs(connection)
    explicit["pods_from_job"] = False  # members we create ourselves: a missing one was lost
    lost = await first_event(GangRunTrigger(**explicit))
    assert lost["reason"] == "member_lost"
