"""The ``on_kill`` guard (``triggers.kill``) in every ordering of "a newer try adopts the gang" and
"the cancelled trigger's ``on_kill`` decides", against the emulator.

The task-instance state the triggerer would report is scripted per test; the newer try's adoption is
the operator's own first write, ``hooks.creation.claim_owner``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from airflow_provider_gang.hooks.creation import claim_owner
from airflow_provider_gang.hooks.deletion import kill_targets
from airflow_provider_gang.kube.errors import NotFound
from airflow_provider_gang.kube.resources import CONFIG_MAPS, PROVISIONING_REQUESTS
from airflow_provider_gang.reservation.manifests.owner import OWNER_TRY_ANNOTATION, recorded_owner_try
from airflow_provider_gang.reservation.records.task_state import FINAL_TASK_STATES
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.kill import reason_to_keep
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.testing.eventually import eventually_async

from .gangs import Gang, gang_spec

PR = ReservationMode.PROVISIONING_REQUEST


class ScriptedStateTrigger(ReservationTrigger):
    """Answers ``task_state()`` with ``state``; ``while_reading_state`` runs first (a newer try acting
    while the state read travels through the triggerer's channel)."""

    state = "failed"
    while_reading_state: Callable[[], Awaitable[Any]] | None = None

    async def task_state(self) -> str:
        if self.while_reading_state is not None:
            await self.while_reading_state()
        return self.state


class TaskInstanceOfTry:
    """The trigger's task instance as a triggerer attaches it (only its try number matters here)."""

    dag_id, task_id, run_id, map_index = "dag", "train", "manual__1", -1

    def __init__(self, try_number: int) -> None:
        self.try_number = try_number


async def gang_of_try(client: Any, attempt: int) -> Gang:
    """A reserving gang (owner, PodTemplate, ProvisioningRequest) claimed by try ``attempt``."""
    gang = await Gang(client, gang_spec(PR)).create()
    await claim_owner(client, gang.spec, attempt)
    return gang


def killed_trigger(gang: Gang, connection: dict[str, Any], state: str, **kwargs: Any) -> ScriptedStateTrigger:
    targets = [target.to_dict() for target in kill_targets(gang.spec)]
    arguments = {**gang.reservation_kwargs(connection), "delete_on_kill": targets, **kwargs}
    trigger = ScriptedStateTrigger(**arguments)
    trigger.state = state
    return trigger


async def kill(trigger: ReservationTrigger) -> None:
    await trigger.on_kill()
    await trigger.cleanup()


async def exists(client: Any, gang: Gang) -> dict[str, bool]:
    found = {}
    for kind, name in ((CONFIG_MAPS, gang.names.owner), (PROVISIONING_REQUESTS, gang.names.provisioning_request)):
        try:
            await client.get(kind, name)
            found[kind.plural] = True
        except NotFound:
            found[kind.plural] = False
    return found


KEPT = {"configmaps": True, "provisioningrequests": True}
DELETED = {"configmaps": False, "provisioningrequests": False}


@pytest.mark.parametrize(
    ("state", "own_try", "owner_try", "keeps"),
    [
        pytest.param("deferred", 1, 1, True, id="deferred-reassigned-or-adopted"),
        pytest.param("none", 1, 1, True, id="cleared-not-yet-scheduled"),
        pytest.param("scheduled", 1, 1, True, id="next-try-scheduled"),
        pytest.param("queued", 1, 1, True, id="next-try-queued"),
        pytest.param("running", 1, 1, True, id="next-try-adopting"),
        pytest.param("up_for_retry", 1, 1, True, id="retry-coming"),
        pytest.param("unknown", 1, 1, True, id="state-unreadable"),
        pytest.param("failed", 1, 1, False, id="marked-failed"),
        pytest.param("success", 1, 1, False, id="marked-success"),
        pytest.param("skipped", 1, None, False, id="unmarked-gang-skipped"),
        pytest.param("failed", 1, 2, True, id="newer-try-owns"),
        pytest.param("success", None, 2, True, id="own-try-unknown-gang-marked"),
        pytest.param("failed", None, None, False, id="own-try-unknown-gang-unmarked"),
    ],
)
def test_reason_to_keep(state: str, own_try: int | None, owner_try: int | None, keeps: bool) -> None:
    assert (reason_to_keep(state, own_try, owner_try) is not None) == keeps


def test_final_states_are_airflows_finished_states() -> None:
    from airflow.utils.state import State

    assert {str(state.value) for state in State.finished} == FINAL_TASK_STATES


async def test_claim_owner_marks_the_try_on_create_and_on_adoption(sim, client):
    spec = gang_spec(PR)
    created, was_created = await claim_owner(client, spec, 1)
    assert was_created and recorded_owner_try(created) == 1
    adopted, was_created = await claim_owner(client, spec, 2)
    assert not was_created and recorded_owner_try(adopted) == 2
    assert adopted["metadata"]["uid"] == created["metadata"]["uid"]
    assert adopted["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]


@pytest.mark.parametrize("state", ["deferred", "none", "scheduled", "queued", "running", "up_for_retry"])
async def test_a_cleared_try_keeps_its_gang_for_the_next_try_whatever_its_progress(sim, client, connection, state):
    """Cleared: the next try is on its way (no state, scheduled, queued), adopting (running) or has
    adopted and deferred; its ``on_kill`` must not pull the gang from under it."""
    gang = await gang_of_try(client, 1)
    await kill(killed_trigger(gang, connection, state, try_number=1))
    assert await exists(client, gang) == KEPT


@pytest.mark.parametrize("state", ["failed", "success", "skipped"])
async def test_marked_final_the_try_deletes_its_own_gang(sim, client, connection, state, capfd):
    gang = await gang_of_try(client, 1)
    await kill(killed_trigger(gang, connection, state, try_number=1))
    assert await exists(client, gang) == DELETED
    # The owner counts: the emulator's garbage collector took the rest with it (a real one soon would).
    assert f"Gang {gang.spec.name}: on_kill deleted 1 objects" in capfd.readouterr().out


async def test_a_gang_adopted_by_a_newer_try_that_finished_is_not_the_old_triggers(sim, client, connection):
    """Try 2 adopted the gang, succeeded and kept it (``on_finish="keep"``) before try 1's late
    ``on_kill`` read the state: final, but the gang is try 2's."""
    gang = await gang_of_try(client, 1)
    await claim_owner(client, gang.spec, 2)
    await kill(killed_trigger(gang, connection, "success", try_number=1))
    assert await exists(client, gang) == KEPT


async def test_a_newer_try_adopting_while_on_kill_reads_the_state_wins(sim, client, connection):
    """The state read says final (the user marked try 1 failed, then cleared it at once); try 2 adopts
    while that read travels: the owner changed since ``on_kill`` read it, so the delete is refused."""
    gang = await gang_of_try(client, 1)
    trigger = killed_trigger(gang, connection, "failed", try_number=1)

    async def try_2_adopts() -> None:
        await claim_owner(client, gang.spec, 2)

    trigger.while_reading_state = try_2_adopts
    await kill(trigger)
    assert await exists(client, gang) == KEPT
    owner = await client.get(CONFIG_MAPS, gang.names.owner)
    assert owner["metadata"]["annotations"][OWNER_TRY_ANNOTATION] == "2"


async def test_a_newer_try_adopting_after_the_deletion_starts_afresh(sim, client, connection):
    """The other order: ``on_kill`` deleted first; try 2 then finds nothing and creates its own owner."""
    gang = await gang_of_try(client, 1)
    await kill(killed_trigger(gang, connection, "failed", try_number=1))
    assert await exists(client, gang) == DELETED
    owner, created = await claim_owner(client, gang.spec, 2)
    assert created and recorded_owner_try(owner) == 2


@pytest.mark.parametrize(("task_instance_try", "owner_try", "kept"), [(1, 1, False), (1, 2, True), (None, 2, True)])
async def test_a_trigger_serialized_without_its_try_uses_its_task_instances(
    sim, client, connection, task_instance_try, owner_try, kept
):
    """A trigger given no ``try_number``: the triggerer's task instance tells the try; with neither,
    only an unmarked gang may be deleted."""
    gang = await gang_of_try(client, owner_try)
    trigger = killed_trigger(gang, connection, "failed")
    assert trigger.try_number is None
    if task_instance_try is not None:
        trigger.task_instance = TaskInstanceOfTry(task_instance_try)
    assert trigger.own_try == task_instance_try
    await kill(trigger)
    assert await exists(client, gang) == (KEPT if kept else DELETED)


async def test_an_unmarked_gang_is_deleted_when_the_task_is_final(sim, client, connection):
    gang = await Gang(client, gang_spec(PR)).create()  # an owner without the try mark
    await kill(killed_trigger(gang, connection, "failed", try_number=1))
    assert await exists(client, gang) == DELETED


async def test_with_the_owner_already_gone_the_rest_is_still_deleted(sim, client, connection):
    gang = await gang_of_try(client, 1)
    await client.delete(CONFIG_MAPS, gang.names.owner, propagation_policy="Orphan")

    async def owner_gone() -> bool:  # the orphan finalizer is processed right after the marked delete
        return not (await exists(client, gang))["configmaps"]

    await eventually_async(owner_gone, timeout=2.0, what="the owner ConfigMap deleted", interval=0.02)
    assert await exists(client, gang) == {"configmaps": False, "provisioningrequests": True}
    await kill(killed_trigger(gang, connection, "failed", try_number=1))
    assert await exists(client, gang) == DELETED


def test_try_number_round_trips_and_defaults_to_none(connection):
    kwargs = Gang(None, gang_spec(PR)).reservation_kwargs(connection)  # type: ignore[arg-type]
    classpath, stored = ReservationTrigger(**kwargs, try_number=3).serialize()
    assert stored["try_number"] == 3 and ReservationTrigger(**stored).serialize() == (classpath, stored)
    older = {key: value for key, value in stored.items() if key != "try_number"}
    assert ReservationTrigger(**older).try_number is None
