"""The try history ConfigMaps read from the cluster, for the pages on Airflow 3.1 and 3.2.

Where Airflow has no task state store, each gang task instance keeps its history in one ConfigMap
(``operators.try_store.ClusterTryStore``: ``data`` holds the task state keys ``gang.tries`` and
``gang.current``, each value the JSON text the task state store would hold). :mod:`.history_places`
says where each one is; this module reads them through ``overview_live.read_grouped``, the machinery
of the live conditions, so the rules are theirs: one read per (cluster, namespace) group, every
group concurrently, all within ``live.LIVE_READ_TIMEOUT_SECONDS``; a group that fails says why on
each of its task instances, and the page shows what the database has.

- :func:`read_histories` (the Gangs page): one LIST per group, selected by the history role label
  (``airflow-gang.io/role=try-history``), matched back to task instances by ConfigMap name;
- :func:`read_history` (the Gang view of one task instance): one GET of its ConfigMap.

A history that does not exist (the try has not written one yet, or it expired:
``operators.try_store.RETENTION``) is an empty history, not a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS
from airflow_provider_gang.operators.try_store import HISTORY_ROLE
from airflow_provider_gang.plugin.history_places import HistoryPlace, Key
from airflow_provider_gang.plugin.overview_live import read_grouped
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY

log = logging.getLogger(__name__)

HISTORY_SELECTOR = f"{naming.ROLE_LABEL}={HISTORY_ROLE}"
"""The label selector of every history ConfigMap (``ClusterTryStore`` sets it at creation)."""


@dataclass(frozen=True)
class HistoryRead:
    """What the cluster said of one task instance's history: ``stored`` maps the task state keys
    found to their JSON texts (as the ``task_state_store`` table's ``value``); ``unread`` is why it
    could not be read (``None``: read, possibly empty)."""

    stored: dict[str, str] = field(default_factory=dict)
    unread: str | None = None


def unread(reason: str) -> HistoryRead:
    return HistoryRead(unread=f"the try history could not be read from the cluster: {reason}")


def stored_texts(config_map: Mapping[str, Any] | None) -> dict[str, str]:
    """The task state keys of a history ConfigMap's ``data`` whose values are texts; another value
    (a ConfigMap written by hand) is logged and left out."""
    data = (config_map or {}).get("data") or {}
    found = {}
    for key in (TRIES_KEY, CURRENT_KEY):
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, str):
            found[key] = value
        elif value is not None:
            name = ((config_map or {}).get("metadata") or {}).get("name")
            log.warning("History ConfigMap %s: %s is not a text, left out: %r", name, key, value)
    return found


def keep_history(item: dict[str, Any]) -> dict[str, Any]:
    """What a LIST keeps of each ConfigMap: its name and data (``KubeClient.list``'s ``transform``)."""
    return {"metadata": {"name": (item.get("metadata") or {}).get("name")}, "data": item.get("data")}


async def list_group(client: KubeClient, namespace: str, places: Mapping[Key, HistoryPlace]) -> dict[Key, HistoryRead]:
    """One LIST of the namespace's history ConfigMaps, matched to ``places`` by name."""
    found, _ = await client.list(CONFIG_MAPS, namespace, label_selector=HISTORY_SELECTOR, transform=keep_history)
    by_name = {item["metadata"]["name"]: item for item in found}
    return {key: HistoryRead(stored_texts(by_name.get(place.name))) for key, place in places.items()}


async def get_group(client: KubeClient, namespace: str, places: Mapping[Key, HistoryPlace]) -> dict[Key, HistoryRead]:
    """One GET per ConfigMap of ``places`` (the Gang view passes one)."""
    answers = {}
    for key, place in places.items():
        try:
            answers[key] = HistoryRead(stored_texts(await client.get(CONFIG_MAPS, place.name, namespace)))
        except errors.NotFound:
            answers[key] = HistoryRead()
    return answers


def read_histories(places: Mapping[Key, HistoryPlace]) -> dict[Key, HistoryRead]:
    """The history of every task instance of ``places``: one LIST per (cluster, namespace)."""
    return read_grouped(places, list_group, unread)


def read_history(key: Key, place: HistoryPlace) -> HistoryRead:
    """The history of one task instance: one GET."""
    return read_grouped({key: place}, get_group, unread)[key]
