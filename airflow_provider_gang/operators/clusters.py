"""Where the gangs of a task's tries are, and withdrawing them there: one try may run on another
cluster than the one before it (``reservation.fallback.OtherCluster``).

Every ``TryRecord`` names its cluster (``kubernetes_conn_id``; ``None``: the operator's connection)
and namespace, so the try history stays in one place - the task state store - while the gangs are
on several clusters. A new try withdraws what earlier tries left through each earlier cluster's own
connection (:func:`withdraw_elsewhere`, concurrently with its own preparation: the cluster it left
may be the one that stopped answering, which must not hold the new one back), and what they left on
its own cluster in its preparation (``operators.starting``). A failed withdrawal is logged; every
later try and the task's end (:func:`withdraw_everywhere`) try again, as deleting is idempotent.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_provider_gang.hooks import deletion
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.operators.try_run import TryRun
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

WITHDRAW_TIMEOUT_SECONDS = 120.0
"""Longest wait for the withdrawal on one other cluster (the client retries inside it)."""


@dataclass(frozen=True)
class Place:
    """A cluster (its Airflow connection id), a namespace and the reservation mode of gangs there."""

    conn_id: str
    namespace: str
    mode: ReservationMode

    def describe(self) -> str:
        return f"cluster {self.conn_id} namespace {self.namespace}"


def places_of(run: TryRun, records: Iterable[TryRecord]) -> dict[Place, list[str]]:
    """The gangs of ``records`` by the place they were created in, and the Kueue MultiKueue worker a
    gang ran on when a connection was mapped to it (Kueue's copies there carry the gang's label)."""
    found: dict[Place, list[str]] = {}
    for record in records:
        if not record.gang:
            continue
        namespace, mode = record.namespace or run.settings.namespace, ReservationMode(record.mode)
        conn_ids = [record.kubernetes_conn_id or run.settings.kubernetes_conn_id, record.worker_kubernetes_conn_id]
        for conn_id in filter(None, conn_ids):
            gangs = found.setdefault(Place(conn_id=conn_id, namespace=namespace, mode=mode), [])
            if record.gang not in gangs:
                gangs.append(record.gang)
    return found


def resolve_cluster(run: TryRun, plan: TryPlan) -> ConnectionSettings:
    """The connection of ``plan``'s cluster; an ``OtherCluster`` step whose connection Airflow cannot
    resolve raises :class:`GangArgumentError` naming the step (only a worker can check that)."""
    conn_id = run.conn_id_of(plan)
    try:
        return run.connection(conn_id)
    except Exception as error:
        if conn_id == run.settings.kubernetes_conn_id:
            raise
        position = "" if plan.step_index is None else f"step {plan.step_index + 1} "
        raise GangArgumentError(
            "fallbacks",
            f"{position}({plan.step}) moves the gang to the cluster of connection {conn_id!r}, which "
            f"cannot be used: {type(error).__name__}: {error}",
            f"add an Airflow connection {conn_id!r} of type kubernetes, or change the OtherCluster step",
        ) from error


def withdraw_elsewhere(run: TryRun, places: Mapping[Place, list[str]], here: Place | None) -> threading.Thread | None:
    """Start withdrawing the gangs of every place but ``here`` in a thread of its own; the caller
    joins it (bounded) after its own preparation. Connections are resolved first, on the caller's
    thread (Airflow reads connections through the task runner there); one that cannot be resolved is
    logged and skipped."""
    targets: list[tuple[Place, ConnectionSettings, list[str]]] = []
    for place, gangs in places.items():
        if place == here:
            continue
        try:
            targets.append((place, run.connection(place.conn_id), gangs))
        except Exception as error:
            run.log.warning("Cannot withdraw gangs %s on %s: %s", gangs, place.describe(), error)
    if not targets:
        return None

    def work() -> None:
        for place, connection, gangs in targets:
            _withdraw(run, place, connection, gangs)

    thread = threading.Thread(target=work, name="gang-withdraw-elsewhere", daemon=True)
    thread.start()
    return thread


def withdraw_everywhere(run: TryRun, records: Iterable[TryRecord]) -> None:
    """Withdraw the gangs of ``records`` wherever they are, one place after the other; best effort."""
    for place, gangs in places_of(run, records).items():
        try:
            connection = run.connection(place.conn_id)
        except Exception as error:
            run.log.warning("Cannot withdraw gangs %s on %s: %s", gangs, place.describe(), error)
            continue
        _withdraw(run, place, connection, gangs)


def _withdraw(run: TryRun, place: Place, connection: ConnectionSettings, gangs: list[str]) -> None:
    async def main() -> int:
        async with await run.settings.client_options.connect(connection) as client:
            return await asyncio.wait_for(
                deletion.withdraw(client, place.namespace, gangs, place.mode), WITHDRAW_TIMEOUT_SECONDS
            )

    try:
        withdrawn = asyncio.run(main())
    except Exception as error:  # the try goes on; every later try and the task's end try again
        run.log.warning(
            "Could not withdraw gangs %s on %s (%s: %s); the next try or the task's end tries again",
            gangs,
            place.describe(),
            type(error).__name__,
            error,
        )
        return
    if withdrawn:
        run.log.info("Withdrew %d objects left by earlier tries %s on %s", withdrawn, gangs, place.describe())
