"""The live read behind the Gangs page: one LIST per kind per cluster and namespace, for all rows.

The deferred gangs' trigger rows name the objects each waits on and how to reach their cluster
(:func:`.stored_records.watched_reservation`). They are grouped by cluster (connection id, or the
connection and client options as given) and namespace; each group gets one LIST of
ProvisioningRequests if any of its gangs waits on one, and one LIST of Workloads if any waits on a
Workload - never one call per row. Each object is matched back to its gang (ProvisioningRequest by
name; Workload by the trigger's equality label selector) and worded by ``triggers.progress``, as
the task log words it. Every group is read concurrently, all within
:data:`.live.LIVE_READ_TIMEOUT_SECONDS`; a group that fails says so on its rows.

:func:`read_grouped` is that machinery for any read of one group: ``plugin.history_maps`` reads
the try history ConfigMaps (Airflow 3.1 and 3.2) through it.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.plugin.live import (
    LIVE_READ_TIMEOUT_SECONDS,
    ClusterPlace,
    connection_settings,
    describe_failure,
)
from airflow_provider_gang.plugin.stored_records import WatchedReservation
from airflow_provider_gang.triggers.progress import describe_conditions, describe_workload

Key = tuple[str, str, str, int]
PlaceT = TypeVar("PlaceT", bound=ClusterPlace)
T = TypeVar("T")
GroupRead = Callable[[KubeClient, str, Mapping[Key, PlaceT]], Awaitable[dict[Key, T]]]
"""What is read of one group: ``(client, namespace, members)`` -> an answer per member's task key."""


def group_of(place: ClusterPlace) -> tuple[str, str]:
    """Which LISTs task instances share: their cluster (connection id or connection + options) and
    namespace."""
    cluster = place.kubernetes_conn_id or json.dumps([place.connection, place.client_options], sort_keys=True)
    return cluster, place.namespace


def selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy an equality selector ``a=b,c==d`` (what the triggers store)."""
    for requirement in filter(None, (part.strip() for part in selector.split(","))):
        name, _, value = requirement.replace("==", "=").partition("=")
        if labels.get(name.strip()) != value.strip():
            return False
    return True


def describe_group(
    watched: Mapping[Key, WatchedReservation], requests: Sequence[Any], workloads: Sequence[Any]
) -> dict[Key, str]:
    """Each gang's conditions from its group's two lists (``"no conditions yet"`` when none)."""
    by_name = {(item.get("metadata") or {}).get("name"): item for item in requests}
    found = {}
    for key, gang in watched.items():
        texts = []
        if gang.provisioning_request:
            texts.append(describe_conditions("ProvisioningRequest", by_name.get(gang.provisioning_request)))
        if gang.workload_selector:
            texts.extend(
                describe_workload(item)
                for item in workloads
                if selector_matches(gang.workload_selector, (item.get("metadata") or {}).get("labels") or {})
            )
        found[key] = "; ".join(text for text in texts if text) or "no conditions yet"
    return found


async def read_group(client: KubeClient, namespace: str, watched: Mapping[Key, WatchedReservation]) -> dict[Key, str]:
    """The conditions of one group's gangs: one LIST per kind any of them waits on."""
    requests: list[Any] = []
    workloads: list[Any] = []
    if any(gang.provisioning_request for gang in watched.values()):
        requests, _ = await client.list(PROVISIONING_REQUESTS, namespace)
    if any(gang.workload_selector for gang in watched.values()):
        workloads, _ = await client.list(WORKLOADS, namespace)
    return describe_group(watched, requests, workloads)


async def read_one_group(
    members: Mapping[Key, PlaceT], read: GroupRead[PlaceT, T], failed: Callable[[str], T]
) -> dict[Key, T]:
    """``read`` with one client of the group's cluster; on any error, ``failed`` of why on every member
    (one cluster not answering must not blank the others' rows)."""
    first = next(iter(members.values()))
    try:
        settings = await connection_settings(first)
        async with await ClientOptions.from_dict(first.client_options).connect(settings) as client:
            return await read(client, first.namespace, members)
    except Exception as error:  # one cluster not answering must not blank the others' rows
        return dict.fromkeys(members, failed(describe_failure(error)))


def read_grouped(places: Mapping[Key, PlaceT], read: GroupRead[PlaceT, T], failed: Callable[[str], T]) -> dict[Key, T]:
    """``read`` once per (cluster, namespace) group of ``places`` (:func:`group_of`), every group
    concurrently, all within :data:`.live.LIVE_READ_TIMEOUT_SECONDS`: the answers by task key; a
    group that fails, or every key on the timeout, gets ``failed`` of a sentence saying why. Never
    raises: what the cluster says is a bonus on these pages, never a reason to fail them."""
    if not places:
        return {}
    groups: dict[tuple[str, str], dict[Key, PlaceT]] = defaultdict(dict)
    for key, place in places.items():
        groups[group_of(place)][key] = place

    async def read_all() -> dict[Key, T]:
        found: dict[Key, T] = {}
        for answer in await asyncio.gather(*(read_one_group(group, read, failed) for group in groups.values())):
            found.update(answer)
        return found

    try:
        return asyncio.run(asyncio.wait_for(read_all(), LIVE_READ_TIMEOUT_SECONDS))
    except Exception as error:  # a bonus on these pages, never a reason to fail them
        return dict.fromkeys(places, failed(describe_failure(error)))


def read_live_conditions(watched: Mapping[Key, WatchedReservation]) -> dict[Key, str]:
    """The conditions of every watched gang, by task key; a group that fails, or every row on a
    timeout, says so."""
    return read_grouped(watched, read_group, str)
