"""What the provider stores and passes, read into its typed records for the Gang pages.

The only place in the plugin that interprets the stored formats: the try records of
``gang.tries`` and the try in progress of ``gang.current`` (``reservation.records.tries.TryRecord``,
``reservation.records.task_state.read_current``) and the kwargs of a gang trigger's row
(``reservation.records.triggers.TriggerArguments``). A record that does not read is logged and left
out, so one bad row never hides the rest of a page; formatting for a person is :mod:`.page_model`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.plugin.queries import TriggerRow
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.reading import RecordError
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.reservation.records.triggers import TriggerArguments

log = logging.getLogger(__name__)

GANG_TRIGGER_MODULES = "airflow_provider_gang.triggers."
"""Class path prefix of the provider's triggers: only their rows name a gang to read live."""


@dataclass(frozen=True)
class WatchedReservation:
    """What a gang trigger's row says about the objects its reservation waits on and how to reach
    the cluster (kwargs of ``triggers.base.GangTrigger``, documented in that module).

    Exactly one of ``kubernetes_conn_id`` and ``connection`` (``kube.settings.ConnectionSettings``
    as a dict) is set; ``client_options`` is ``kube.options.ClientOptions`` as a dict. For a run on a
    Kueue MultiKueue worker (``TriggerArguments.members_kubernetes_conn_id``) the cluster is the
    worker's: the members and the Workload the run watches are there.
    """

    namespace: str
    kubernetes_conn_id: str | None
    connection: dict[str, Any] | None
    provisioning_request: str | None
    workload_selector: str | None
    client_options: dict[str, Any]


def watched_reservation(trigger: TriggerRow | None) -> WatchedReservation | None:
    """The reservation a trigger row waits on; ``None`` for no row or another package's trigger.

    Raises ``ValueError`` for a row of the provider's triggers whose kwargs do not read as
    ``TriggerArguments`` (no gang: no namespace, or not exactly one of ``kubernetes_conn_id`` and
    ``connection``), naming what is wrong."""
    if trigger is None or not trigger.classpath.startswith(GANG_TRIGGER_MODULES):
        return None
    try:
        arguments = TriggerArguments.from_dict(trigger.kwargs)
    except RecordError as error:
        raise ValueError(f"{trigger.classpath} does not wait on a gang ({error})") from error
    return WatchedReservation(  # a run on a MultiKueue worker: its pods and Workload are there
        namespace=arguments.namespace,
        kubernetes_conn_id=arguments.members_kubernetes_conn_id or arguments.kubernetes_conn_id,
        connection=None if arguments.connection is None else dict(arguments.connection),
        provisioning_request=arguments.provisioning_request,
        workload_selector=arguments.workload_selector,
        client_options=dict(arguments.client_options),
    )


def read_tries(stored: Sequence[Mapping[str, Any]]) -> list[TryRecord]:
    """The records of ``gang.tries`` that read as a ``TryRecord``; the others are logged and left out
    (one unreadable record does not hide the others, unlike ``task_state.read_tries``)."""
    records = []
    for item in stored:
        try:
            records.append(TryRecord.from_dict(item))
        except RecordError as error:
            log.warning("A stored try record of the task instance does not read (%s): %r", error, item)
    return records


def read_current(stored: Mapping[str, Any] | None) -> TryState | None:
    """The try in progress from ``gang.current`` (``task_state.read_current``); ``None`` without one
    or for one that does not read (written by a newer provider: logged)."""
    try:
        return task_state.read_current(stored)
    except RecordError as error:
        log.warning("The stored try in progress does not read (%s)", error)
        return None
