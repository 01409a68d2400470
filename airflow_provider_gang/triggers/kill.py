"""``on_kill`` of the gang triggers: when a cancelled trigger may delete its gang, and the deletion.

Airflow 3.3 calls a trigger's ``on_kill`` when a user action cancels it - clear, mark failed, mark
success - but also (open bug, PR #73454) for a trigger that was merely *reassigned* to another
triggerer. And a cleared deferred task gets its next try at once: the scheduler sets it ``scheduled``
(the try number goes up there, ``DagRun.schedule_tis``), a worker runs it, and that try *adopts* the
gang of the try that never finished (``operators.plan`` rule 2: same names, nothing duplicated) -
before or after the triggerer gets round to cancelling the old trigger (about a second apart under a
real triggerer, tests/standalone). So a cancelled trigger must not delete a gang that lives on
elsewhere. It deletes only when all three hold:

1. **The task instance state is final** (``reservation.records.task_state.FINAL_TASK_STATES``), read
   through the triggerer's supervisor channel as cncf-kubernetes' ``KubernetesPodTrigger`` does. ``deferred`` is the
   reassignment bug, or a newer try that already adopted the gang and deferred; no state,
   ``scheduled``, ``queued``, ``running``, ``restarting``, ``up_for_retry`` mean a newer try is on
   its way or running, and it adopts the gang (then uses or withdraws it). An unreadable state keeps
   the gang too: a kept gang is bounded (the next try adopts or withdraws it, a reservation expires),
   a wrongly deleted one is lost work.
2. **No other try owns the gang.** Every try marks the owner ConfigMap with its number
   (``reservation.manifests.owner.OWNER_TRY_ANNOTATION``) as its first write, whether it creates or
   adopts the gang (``hooks.creation.claim_owner``). A mark naming another try than the
   trigger's own (its ``try_number`` argument, else its task instance's) means the gang was taken
   over - e.g. by a newer try that has finished meanwhile and kept it (``on_finish="keep"``). The
   execution API gives a triggerer no way to read the task instance's *current* try number (its
   ``GetTaskStates`` answers states only), so the mark is the authority.
3. **Nothing changed in between.** The owner ConfigMap is read *before* the state, and deleted with
   that read's ``uid`` and ``resourceVersion`` as DeleteOptions preconditions
   (``hooks.deletion.delete_owner_if_unchanged``): a try that adopts after the read changes the
   ``resourceVersion`` with its mark, and the API server answers 409 instead of deleting (an atomic
   compare-and-delete). Only then are the ``delete_on_kill`` targets deleted, by the operator's own
   ``hooks.deletion.delete_gang`` (the garbage collector would delete them too; deleting is idempotent),
   then the same targets on the cluster the members run on when it is another (a Kueue MultiKueue
   worker, ``members_kubernetes_conn_id``): the guard is the manager's, which holds the owner.

So "try N+1 adopts" and "try N's ``on_kill`` decides" are safe in either order. Not covered: a try
that starts *after* the owner is gone creates a new owner, and on a real cluster (asynchronous
garbage collection) may adopt a child of the old one about to be collected; that takes a user who
marks the task final and clears it again within the second the deletion takes.

The check and the deletion run in a task of their own that ``on_kill`` only waits for, shielded (see
:func:`on_kill`), with a client of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from asgiref.sync import sync_to_async

from airflow_provider_gang.hooks import deletion
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.reservation.manifests.owner import recorded_owner_try
from airflow_provider_gang.reservation.records.task_state import FINAL_TASK_STATES
from airflow_provider_gang.reservation.records.triggers import DeleteTarget

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
    def delete_on_kill(self) -> Sequence[DeleteTarget]: ...

    @property
    def own_try(self) -> int | None: ...

    @property
    def members_kubernetes_conn_id(self) -> str | None: ...

    @property
    def log(self) -> Any: ...  # a logging.Logger, or Airflow's structured logger in a triggerer

    async def connect(self, conn_id: str | None = None) -> KubeClient: ...

    async def task_state(self) -> str: ...


def reason_to_keep(state: str, own_try: int | None, owner_try: int | None) -> str | None:
    """Why a cancelled trigger must keep its gang (rules 1 and 2 of the module docstring), or ``None``.

    ``state``: :func:`task_state`'s answer; ``own_try``: the trigger's try (``None``: unknown);
    ``owner_try``: the owner ConfigMap's mark (``None``: unmarked, or the owner is gone). Pure.
    """
    if state not in FINAL_TASK_STATES:
        return f"task instance state is {state!r}, not final (reassigned, or a newer try adopts the gang)"
    if owner_try is not None and owner_try != own_try:
        return f"try {owner_try} owns the gang now, not this trigger's try {own_try}"
    return None


async def on_kill(trigger: KillableTrigger) -> None:
    """Delete the gang's objects after a user action, unless the gang may live on elsewhere.

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
        async with await trigger.connect() as client:
            owner = await deletion.read_owner(client, trigger.gang_name, trigger.namespace)
            state = await trigger.task_state()
            keep = reason_to_keep(state, trigger.own_try, None if owner is None else recorded_owner_try(owner))
            if keep is not None:
                log.warning("Gang %s: not deleting: %s", gang, keep)
                return
            log.info("Gang %s: task instance state is %r (try %s); deleting the gang", gang, state, trigger.own_try)
            await asyncio.wait_for(_delete_unless_adopted(client, trigger, owner), KILL_BUDGET_SECONDS)
    except Exception:
        log.exception("Gang %s: on_kill failed; the gang's objects may remain", gang)


async def _delete_unless_adopted(client: KubeClient, trigger: KillableTrigger, owner: Mapping[str, Any] | None) -> None:
    """Rule 3: delete the owner only if it is unchanged since ``owner`` was read, then the targets."""
    count = 0
    if owner is not None:
        deleted = await deletion.delete_owner_if_unchanged(client, trigger.namespace, owner)
        if deleted is None:
            trigger.log.warning(
                "Gang %s: not deleting: its owner ConfigMap changed since on_kill read it "
                "(a newer try adopted the gang)",
                trigger.gang_name,
            )
            return
        count += int(deleted)
    count += await deletion.delete_gang(client, trigger.namespace, trigger.delete_on_kill)
    count += await _delete_where_members_run(trigger)
    trigger.log.info("Gang %s: on_kill deleted %d objects", trigger.gang_name, count)


async def _delete_where_members_run(trigger: KillableTrigger) -> int:
    """The ``delete_on_kill`` targets on the cluster the members run on, when it is not the trigger's
    own (a MultiKueue worker: Kueue would remove its copies once the manager's Workload is gone; this
    does it at once, with the same targets, by the gang's label). ``0`` when there is none."""
    conn_id = trigger.members_kubernetes_conn_id
    if conn_id is None:
        return 0
    async with await trigger.connect(conn_id) as client:
        return await deletion.delete_gang(client, trigger.namespace, trigger.delete_on_kill)


async def delete_gang_objects(trigger: KillableTrigger) -> int:
    """Delete every ``delete_on_kill`` target (idempotent, unguarded) with a client of its own, on the
    trigger's cluster and where the members run; returns how many objects were deleted."""
    async with await trigger.connect() as client:
        deleted = await deletion.delete_gang(client, trigger.namespace, trigger.delete_on_kill)
    return deleted + await _delete_where_members_run(trigger)


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
