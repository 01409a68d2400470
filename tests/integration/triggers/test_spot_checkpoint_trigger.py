"""GangRunTrigger on a spot gang with a checkpoint, both members on one spot node: the kubelet's
graceful node shutdown as GKE does it ends the run with ``spot_preempted`` and the latest checkpoint
the members' termination messages reported, read before their pods were deleted. The kubelet writes
each pod's ``Failed``/``Terminated`` status with ``DisruptionTarget`` ``TerminationByKubelet`` in one
write once that pod's containers stopped (``mergePodStatus`` in ``pkg/kubelet/status/status_manager.go``
holds the condition back until then), pod by pod: the run waits for the member still stopping on the
same node, whose message comes last."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.reservation.checkpoint import Checkpoint
from airflow_provider_gang.reservation.manifests import pods
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from tests.cluster_time import ClusterTime

from .gangs import Gang, condition, first_event, gang_spec, until_seen, until_watching

SHUTDOWN = "Pod was terminated in response to imminent node shutdown."
NODE = "gke-sim-l4-spot-a"


def _terminated(exit_code: int, message: str = "") -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-01-01T00:10:00Z"}
    if message:
        state["message"] = message
    return {"terminated": state}


def _status(
    phase: str, state: dict[str, Any], *, reason: str = "", conditions: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase,
        "startTime": "2026-01-01T00:00:00Z",
        "conditions": list(conditions),
        "containerStatuses": [
            {"name": "trainer", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "", "state": state}
        ],
    }
    if reason:
        status["reason"], status["message"] = reason, SHUTDOWN
    return status


async def spot_gang(client: Any) -> Gang:
    spec = dataclasses.replace(
        gang_spec(ReservationMode.PROVISIONING_REQUEST, size=2),
        spot=True,
        checkpoint=Checkpoint("/ckpt").for_try(1, None),
    )
    gang = await Gang(client, spec).create()
    for rank in range(2):  # bound to one node, as the scheduler would place both on a 2-GPU node
        body = pods.launch_pod(spec, rank, owner_uid=gang.owner_uid)
        await client.create(PODS, {**body, "spec": {**body["spec"], "nodeName": NODE}})
    for rank in range(2):
        await gang.set_member_phase(rank, "Running")
    return gang


async def preempt_rank_1(
    gang: Gang, client: Any, rank_0_message: str, trigger: GangRunTrigger, manual_time: ClusterTime
) -> None:
    """The members' node is shut down: rank 1 stops first; rank 0, still saving on SIGTERM, stops
    later and leaves its termination message."""
    disrupted = condition("DisruptionTarget", reason="TerminationByKubelet", message=SHUTDOWN)
    await client.patch(
        PODS,
        gang.names.member(1),
        {"status": _status("Failed", _terminated(143), reason="Terminated", conditions=(disrupted,))},
        subresource="status",
    )
    await until_seen(trigger, gang.names.member(1), "Failed")
    await manual_time.read_again()  # the trigger decided on rank 1 preempted, rank 0 still stopping ...
    assert not trigger.fired  # ... and keeps watching
    await client.patch(
        PODS,
        gang.names.member(0),
        {"status": _status("Failed", _terminated(143, rank_0_message), reason="Terminated", conditions=(disrupted,))},
        subresource="status",
    )


async def run_through_preemption(
    gang: Gang, client: Any, connection: Any, message: str, manual_time: ClusterTime
) -> dict[str, Any]:
    """The run through the shutdown; the node and its pods go only after the trigger's event, as on
    GKE, where the node is deleted ``noticeSeconds`` after the notice: the shared watch hands a
    subscriber the latest state, so a status replaced at once by the deletion could be skipped."""
    trigger = GangRunTrigger(**gang.run_kwargs(connection), read_checkpoints=True)
    task = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await preempt_rank_1(gang, client, message, trigger, manual_time)
    event = await task
    for rank in range(2):
        await client.delete(PODS, gang.names.member(rank))
    return event


async def test_a_preempted_spot_member_ends_the_run_with_the_checkpoint_reported(sim, client, connection, manual_time):
    gang = await spot_gang(client)
    event = await run_through_preemption(gang, client, connection, '{"checkpoint_step": 6, "step": 8}', manual_time)
    assert (event["phase"], event["reason"]) == ("failed", "spot_preempted")
    assert event["checkpoint"] == {"step": 6, "progress": 8, "pod": gang.names.member(0), "rank": 0}


async def test_a_malformed_checkpoint_message_is_ignored_with_a_warning_naming_the_pod(
    sim, client, connection, capfd: pytest.CaptureFixture[str], manual_time
):
    gang = await spot_gang(client)
    event = await run_through_preemption(gang, client, connection, '{"checkpoint_step": "six"}', manual_time)
    assert event["reason"] == "spot_preempted"
    assert event["checkpoint"] is None
    warnings = [line for line in capfd.readouterr().out.splitlines() if "termination message" in line]
    assert len(warnings) == 1 and f"pod {gang.names.member(0)}: termination message" in warnings[0], warnings
    assert "[warning" in warnings[0]


def test_read_checkpoints_is_serialized_and_defaults_to_off(connection):
    kwargs = Gang(None, gang_spec(ReservationMode.PROVISIONING_REQUEST)).run_kwargs(connection)  # type: ignore[arg-type]
    assert GangRunTrigger(**kwargs).serialize()[1]["read_checkpoints"] is False
    assert GangRunTrigger(**kwargs, read_checkpoints=True).serialize()[1]["read_checkpoints"] is True
