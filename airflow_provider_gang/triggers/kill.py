"""``on_kill`` of the gang triggers: when a cancelled trigger may delete its gang, and the deletion.

Airflow 3.3 calls a trigger's ``on_kill`` when a user action cancels it (clear, mark failed, mark
success), but also - open bug, PR #73454 - for a trigger that was merely *reassigned* to another
triggerer, whose task instance is still deferred and whose gang must live on. So the deletion is
guarded: it happens only when the task instance is no longer ``DEFERRED``.

The check and the deletion run in a task of their own that ``on_kill`` only waits for, shielded (see
:func:`on_kill`); :func:`delete_gang_objects` uses a client of its own for the same reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from asgiref.sync import sync_to_async

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import by_key

DEFERRED = "deferred"
#: ``task_state()`` when the state cannot be read (no task instance attached, API error).
UNKNOWN_STATE = "unknown"
#: ``task_state()`` for a task instance without state (just cleared).
NO_STATE = "none"
KILL_BUDGET_SECONDS = 120.0
"""Longest :func:`on_kill` keeps deleting (each request also has its own timeout)."""
_KILLS_IN_FLIGHT: set[asyncio.Future[None]] = set()
"""Running ``on_kill`` deletions: the event loop keeps only weak references to tasks."""


class KillableTrigger(Protocol):
    """What :func:`on_kill` needs of a gang trigger (``GangTrigger`` provides it)."""

    @property
    def gang_name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def fired(self) -> bool: ...

    @property
    def delete_on_kill(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def log(self) -> Any: ...  # a logging.Logger, or Airflow's structured logger in a triggerer

    async def connect(self) -> KubeClient: ...

    async def task_state(self) -> str: ...


async def on_kill(trigger: KillableTrigger) -> None:
    """Delete the gang's objects after a user action, unless the gang may still be live elsewhere.

    The check and the deletion run in a task of their own that ``on_kill`` only waits for, shielded:
    Airflow 3.3.2's triggerer answers every state sync of its trigger runner with *all* triggers still
    being cancelled (``TriggerRunnerSupervisor._handle_request``: ``to_cancel=self.cancelling_triggers``),
    so the runner cancels the trigger's task again about once a second until it has finished. An
    ``on_kill`` that awaits longer than that (reading the task state goes through that same channel)
    was cut short and deleted nothing; the triggerer swallows that cancellation silently (seen under a
    real triggerer, tests/standalone). The detached task uses its own client, because ``cleanup()``
    closes the trigger's one as soon as ``on_kill`` returns, and ends within :data:`KILL_BUDGET_SECONDS`.
    """
    kill = asyncio.ensure_future(_kill_unless_live_elsewhere(trigger))
    _KILLS_IN_FLIGHT.add(kill)
    kill.add_done_callback(_KILLS_IN_FLIGHT.discard)
    try:
        await asyncio.shield(kill)
    except asyncio.CancelledError:
        trigger.log.info("Gang %s: on_kill cancelled again; its deletion goes on in the background", trigger.gang_name)
        raise


async def _kill_unless_live_elsewhere(trigger: KillableTrigger) -> None:
    """The body of :func:`on_kill`; a background task's end, so it logs its errors instead of raising."""
    log, gang = trigger.log, trigger.gang_name
    try:
        if trigger.fired:
            log.info("Gang %s: event already fired; on_kill deletes nothing", gang)
            return
        state = await trigger.task_state()
        if state in (DEFERRED, UNKNOWN_STATE):
            log.warning("Gang %s: task instance state is %r; not deleting (the trigger may only have been reassigned)",
                        gang, state)
            return
        log.info("Gang %s: task instance state is %r; deleting the gang", gang, state)
        await asyncio.wait_for(delete_gang_objects(trigger), KILL_BUDGET_SECONDS)
    except Exception:
        log.exception("Gang %s: on_kill failed; the gang's objects may remain", gang)


async def delete_gang_objects(trigger: KillableTrigger) -> int:
    """Delete every ``delete_on_kill`` target (idempotent) with a client of its own; returns how many
    objects were deleted."""
    deleted = 0
    async with await trigger.connect() as client:
        for target in trigger.delete_on_kill:
            resource = by_key(target["resource"])
            names: list[str] = [target["name"]] if target.get("name") else []
            if target.get("label_selector"):
                items, _ = await client.list(resource, trigger.namespace, label_selector=target["label_selector"])
                names.extend(str(item["metadata"]["name"]) for item in items)
            for name in names:
                try:
                    deleted += await client.delete(resource, name, trigger.namespace)
                except errors.KubeError:
                    trigger.log.exception("Gang %s: could not delete %s %s", trigger.gang_name, resource.kind, name)
    trigger.log.info("Gang %s: on_kill deleted %d objects", trigger.gang_name, deleted)
    return deleted


async def task_state(task_instance: Any, log: Any, gang: str) -> str:
    """State of ``task_instance`` (the trigger's), read from the Airflow execution API.

    :data:`UNKNOWN_STATE` when it cannot be read (then :func:`on_kill` keeps the gang: a leaked
    reservation is bounded by its own expiry, a wrongly deleted running gang is lost work).
    """
    if task_instance is None:
        return UNKNOWN_STATE
    ti = task_instance
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        # The same call, through the triggerer's supervisor channel, as cncf-kubernetes'
        # KubernetesPodTrigger.get_task_state (10.25).
        lookup: Callable[..., Any] = sync_to_async(RuntimeTaskInstance.get_task_states)
        states = await lookup(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=ti.map_index)
        key = f"{ti.task_id}_{ti.map_index}" if ti.map_index >= 0 else ti.task_id
        state = states[ti.run_id][key]
    except Exception:
        log.exception("Gang %s: could not read the task instance state", gang)
        return UNKNOWN_STATE
    return NO_STATE if state is None else str(getattr(state, "value", state))
