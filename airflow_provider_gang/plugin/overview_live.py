"""The live read behind the Gangs page: one LIST per kind per cluster and namespace, for all rows.

The deferred gangs' trigger rows name the objects each waits on and how to reach their cluster
(:func:`.stored_records.watched_reservation`). They are grouped by cluster (connection id, or the
connection and client options as given) and namespace; each group gets one LIST of
ProvisioningRequests if any of its gangs waits on one, and one LIST of Workloads if any waits on a
Workload - never one call per row. Each object is matched back to its gang (ProvisioningRequest by
name; Workload by the trigger's equality label selector) and worded by ``triggers.progress``, as
the task log words it. Every group is read concurrently, all within
:data:`.live.LIVE_READ_TIMEOUT_SECONDS`; a group that fails says so on its rows.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.plugin.live import LIVE_READ_TIMEOUT_SECONDS, connection_settings, describe_failure
from airflow_provider_gang.plugin.stored_records import WatchedReservation
from airflow_provider_gang.triggers.progress import describe_conditions, describe_workload

Key = tuple[str, str, str, int]


def group_of(watched: WatchedReservation) -> tuple[str, str]:
    """Which LISTs a gang shares: its cluster (connection id or connection + options) and namespace."""
    cluster = watched.kubernetes_conn_id or json.dumps([watched.connection, watched.client_options], sort_keys=True)
    return cluster, watched.namespace


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


async def read_group(watched: Mapping[Key, WatchedReservation]) -> dict[Key, str]:
    first = next(iter(watched.values()))
    try:
        settings = await connection_settings(first)
        async with await ClientOptions.from_dict(first.client_options).connect(settings) as client:
            requests: list[Any] = []
            workloads: list[Any] = []
            if any(gang.provisioning_request for gang in watched.values()):
                requests, _ = await client.list(PROVISIONING_REQUESTS, first.namespace)
            if any(gang.workload_selector for gang in watched.values()):
                workloads, _ = await client.list(WORKLOADS, first.namespace)
    except Exception as error:  # one cluster not answering must not blank the others' rows
        return dict.fromkeys(watched, describe_failure(error))
    return describe_group(watched, requests, workloads)


async def read_all(watched: Mapping[Key, WatchedReservation]) -> dict[Key, str]:
    groups: dict[tuple[str, str], dict[Key, WatchedReservation]] = defaultdict(dict)
    for key, gang in watched.items():
        groups[group_of(gang)][key] = gang
    found: dict[Key, str] = {}
    for answer in await asyncio.gather(*(read_group(group) for group in groups.values())):
        found.update(answer)
    return found


def read_live_conditions(watched: Mapping[Key, WatchedReservation]) -> dict[Key, str]:
    """The conditions of every watched gang, by task key; on a timeout every row says so."""
    if not watched:
        return {}
    try:
        return asyncio.run(asyncio.wait_for(read_all(watched), LIVE_READ_TIMEOUT_SECONDS))
    except Exception as error:  # a bonus on this page, never a reason to fail it
        return dict.fromkeys(watched, describe_failure(error))
