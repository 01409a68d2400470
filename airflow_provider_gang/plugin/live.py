"""What the Gang pages read from the cluster now: the conditions a deferred try's reservation waits
on, its member pods, and the same reads grouped for every row of the Gangs page.

A deferred gang's trigger row names the objects its wait watches and the connection to reach them
(:class:`.stored_records.WatchedReservation`). The api-server resolves that connection as the
triggerer would (``hooks.gang.GangHook`` for a ``kubernetes_conn_id``, run in a thread as the hook
reads the connection synchronously), opens one client with the trigger's ``client_options``, and
reads within :data:`LIVE_READ_TIMEOUT_SECONDS`. What the pages show is worded by
``triggers.progress``, as the task log words it.

- The Gang view (one task instance): :func:`read_live_conditions` reads the ProvisioningRequest
  (one GET) or the Workloads (one LIST by label selector); :func:`read_live_pods` the member pods.
- The Gangs page (every deferred row): :func:`read_conditions_by_task` groups the gangs by cluster
  (connection id, or the connection and client options as given: ``kube.watch_registry.connection_key``)
  and namespace; each group gets one LIST of ProvisioningRequests if any of its gangs waits on one,
  and one LIST of Workloads if any waits on a Workload - never one call per row. Each object is
  matched back to its gang (ProvisioningRequest by name; Workload by the trigger's label selector,
  ``kube.selectors``). Every group is read concurrently; a group that fails says so on its rows.
  :func:`read_grouped` is that machinery for any read of one group: ``plugin.try_history`` reads the
  try history ConfigMaps (Airflow 3.1 and 3.2) through it.

Never raises: what the cluster says is a bonus on these pages, never a reason to fail them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.kube.selectors import Selector
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.watch_registry import connection_key
from airflow_provider_gang.plugin.members_table import LivePod
from airflow_provider_gang.plugin.stored_records import TaskKey, WatchedReservation
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.triggers.progress import describe_conditions, describe_workload

LIVE_READ_TIMEOUT_SECONDS = 5.0
"""Longest the page waits for the cluster (the Gang view reloads every ``gang_view.REFRESH_SECONDS``)."""


class ClusterPlace(Protocol):
    """A namespace of a cluster and how to reach it: exactly one of ``kubernetes_conn_id`` and
    ``connection`` (``kube.settings.ConnectionSettings`` as a dict) is set; ``client_options`` is
    ``kube.options.ClientOptions`` as a dict (:class:`.stored_records.WatchedReservation`,
    ``plugin.try_history.HistoryPlace``)."""

    @property
    def namespace(self) -> str: ...

    @property
    def kubernetes_conn_id(self) -> str | None: ...

    @property
    def connection(self) -> dict[str, Any] | None: ...

    @property
    def client_options(self) -> dict[str, Any]: ...


PlaceT = TypeVar("PlaceT", bound=ClusterPlace)
T = TypeVar("T")


def read_live_conditions(watched: WatchedReservation | None) -> str | None:
    """The conditions of the ProvisioningRequest or Workload ``watched`` names, read now (a Workload
    with its state, pending reason and admission checks, ``triggers.progress.describe_workload``);
    ``None`` for no gang, else a sentence saying why they could not be read. Never raises: the
    page shows what it has."""
    if watched is None:
        return None
    try:
        return asyncio.run(asyncio.wait_for(read_conditions(watched), LIVE_READ_TIMEOUT_SECONDS))
    except Exception as error:  # the cluster's answer is a bonus on this page, never a reason to fail it
        return describe_failure(error)


def describe_failure(error: Exception) -> str:
    """Why the conditions are not shown, for the page."""
    return f"could not read the cluster ({type(error).__name__}: {error})"


def read_live_pods(watched: WatchedReservation | None, gang: str) -> tuple[LivePod, ...] | None:
    """The gang's member pods, one LIST by the gang label (``reservation.naming.GANG_LABEL``);
    ``None`` when there is no gang to read or the cluster did not answer in time (the page then
    shows the members from the try records)."""
    if watched is None:
        return None
    try:
        return asyncio.run(asyncio.wait_for(read_pods(watched, gang), LIVE_READ_TIMEOUT_SECONDS))
    except Exception:  # as for the conditions: a bonus, never a reason to fail the page
        return None


async def read_pods(watched: WatchedReservation, gang: str) -> tuple[LivePod, ...]:
    async with connected(watched) as client:
        pods, _ = await client.list(PODS, watched.namespace, label_selector=f"{naming.GANG_LABEL}={gang}")
    return tuple(live_pod(pod) for pod in pods)


def live_pod(pod: Mapping[str, Any]) -> LivePod:
    """A member as the table shows it: rank label, node, phase, the first container's exit code and
    restarts (``status.containerStatuses``, https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/)."""
    metadata, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    rank_label = (metadata.get("labels") or {}).get(naming.RANK_LABEL)
    containers = status.get("containerStatuses") or [{}]
    terminated = (containers[0].get("state") or {}).get("terminated") or {}
    exit_code = terminated.get("exitCode")
    return LivePod(
        rank=int(str(rank_label)) if str(rank_label).isdigit() else None,
        name=str(metadata.get("name") or "unnamed"),
        node=spec.get("nodeName"),
        phase=status.get("phase"),
        exit_code=int(exit_code) if isinstance(exit_code, int) else None,
        restarts=sum(int(item.get("restartCount") or 0) for item in containers),
    )


async def read_conditions(watched: WatchedReservation) -> str:
    """One GET of the ProvisioningRequest and one LIST of the Workloads ``watched`` names (either
    may be absent), described; ``"no conditions yet"`` when none of them has any."""
    found: list[str] = []
    async with connected(watched) as client:
        if watched.provisioning_request:
            request = await client.get(PROVISIONING_REQUESTS, watched.provisioning_request, watched.namespace)
            found.append(describe_conditions("ProvisioningRequest", request))
        if watched.workload_selector:
            workloads, _ = await client.list(WORKLOADS, watched.namespace, label_selector=watched.workload_selector)
            found.extend(describe_workload(workload) for workload in workloads)
    return "; ".join(text for text in found if text) or "no conditions yet"


@contextlib.asynccontextmanager
async def connected(place: ClusterPlace) -> AsyncIterator[KubeClient]:
    """A client of the cluster of ``place`` with its ``client_options``, closed on leaving."""
    settings = await connection_settings(place)
    async with await ClientOptions.from_dict(place.client_options).connect(settings) as client:
        yield client


async def connection_settings(place: ClusterPlace) -> ConnectionSettings:
    """The cluster of ``place`` (the one a trigger talks to): its ``connection`` as given, or its
    ``kubernetes_conn_id`` resolved by ``GangHook`` in a thread."""
    if place.connection is not None:
        return ConnectionSettings.from_dict(place.connection)
    hook = GangHook(conn_id=place.kubernetes_conn_id)
    return await asyncio.to_thread(hook.connection_settings)


GroupRead = Callable[[KubeClient, str, Mapping[TaskKey, PlaceT]], Awaitable[dict[TaskKey, T]]]
"""What is read of one group: ``(client, namespace, members)`` -> an answer per member's task key."""


def group_of(place: ClusterPlace) -> tuple[str, str]:
    """Which LISTs task instances share: their cluster (connection id or connection + options) and
    namespace."""
    cluster = place.kubernetes_conn_id or connection_key(place.connection or {}, place.client_options)
    return cluster, place.namespace


def describe_group(
    watched: Mapping[TaskKey, WatchedReservation], requests: Sequence[Any], workloads: Sequence[Any]
) -> dict[TaskKey, str]:
    """Each gang's conditions from its group's two lists (``"no conditions yet"`` when none)."""
    by_name = {(item.get("metadata") or {}).get("name"): item for item in requests}
    found = {}
    for key, gang in watched.items():
        texts = []
        if gang.provisioning_request:
            texts.append(describe_conditions("ProvisioningRequest", by_name.get(gang.provisioning_request)))
        if gang.workload_selector:
            selector = Selector.parse(label_selector=gang.workload_selector)
            texts.extend(describe_workload(item) for item in workloads if selector.matches(item))
        found[key] = "; ".join(text for text in texts if text) or "no conditions yet"
    return found


async def read_group(
    client: KubeClient, namespace: str, watched: Mapping[TaskKey, WatchedReservation]
) -> dict[TaskKey, str]:
    """The conditions of one group's gangs: one LIST per kind any of them waits on."""
    requests: list[Any] = []
    workloads: list[Any] = []
    if any(gang.provisioning_request for gang in watched.values()):
        requests, _ = await client.list(PROVISIONING_REQUESTS, namespace)
    if any(gang.workload_selector for gang in watched.values()):
        workloads, _ = await client.list(WORKLOADS, namespace)
    return describe_group(watched, requests, workloads)


async def read_one_group(
    members: Mapping[TaskKey, PlaceT], read: GroupRead[PlaceT, T], failed: Callable[[str], T]
) -> dict[TaskKey, T]:
    """``read`` with one client of the group's cluster; on any error, ``failed`` of why on every member
    (one cluster not answering must not blank the others' rows)."""
    first = next(iter(members.values()))
    try:
        async with connected(first) as client:
            return await read(client, first.namespace, members)
    except Exception as error:  # one cluster not answering must not blank the others' rows
        return dict.fromkeys(members, failed(describe_failure(error)))


def read_grouped(
    places: Mapping[TaskKey, PlaceT], read: GroupRead[PlaceT, T], failed: Callable[[str], T]
) -> dict[TaskKey, T]:
    """``read`` once per (cluster, namespace) group of ``places`` (:func:`group_of`), every group
    concurrently, all within :data:`LIVE_READ_TIMEOUT_SECONDS`: the answers by task key; a
    group that fails, or every key on the timeout, gets ``failed`` of a sentence saying why. Never
    raises: what the cluster says is a bonus on these pages, never a reason to fail them."""
    if not places:
        return {}
    groups: dict[tuple[str, str], dict[TaskKey, PlaceT]] = defaultdict(dict)
    for key, place in places.items():
        groups[group_of(place)][key] = place

    async def read_all() -> dict[TaskKey, T]:
        found: dict[TaskKey, T] = {}
        for answer in await asyncio.gather(*(read_one_group(group, read, failed) for group in groups.values())):
            found.update(answer)
        return found

    try:
        return asyncio.run(asyncio.wait_for(read_all(), LIVE_READ_TIMEOUT_SECONDS))
    except Exception as error:  # a bonus on these pages, never a reason to fail them
        return dict.fromkeys(places, failed(describe_failure(error)))


def read_conditions_by_task(watched: Mapping[TaskKey, WatchedReservation]) -> dict[TaskKey, str]:
    """The conditions of every watched gang, by task key; a group that fails, or every row on a
    timeout, says so."""
    return read_grouped(watched, read_group, str)
