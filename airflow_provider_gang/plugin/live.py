"""The live read of a deferred try's reservation: its conditions as the cluster answers now.

The trigger row of a deferred gang names the objects its wait watches and the connection to reach
them (:class:`.stored_records.WatchedReservation`). The api-server resolves that connection as the
triggerer would (``hooks.gang.GangHook`` for a ``kubernetes_conn_id``, run in a thread as the hook
reads the connection synchronously), opens one client with the trigger's ``client_options`` and
reads the ProvisioningRequest (one GET) or the Workloads (one LIST by label selector), all within
:data:`LIVE_READ_TIMEOUT_SECONDS`. What the page shows is worded by ``triggers.progress``, as the
task log words it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.plugin.stored_records import WatchedReservation
from airflow_provider_gang.plugin.task_view import LivePod
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.triggers.progress import describe_conditions, describe_workload

LIVE_READ_TIMEOUT_SECONDS = 5.0
"""Longest the page waits for the cluster (the page reloads every ``page_model.REFRESH_SECONDS``)."""


class ClusterPlace(Protocol):
    """A namespace of a cluster and how to reach it: exactly one of ``kubernetes_conn_id`` and
    ``connection`` (``kube.settings.ConnectionSettings`` as a dict) is set; ``client_options`` is
    ``kube.options.ClientOptions`` as a dict (:class:`.stored_records.WatchedReservation`,
    ``plugin.history_places.HistoryPlace``)."""

    @property
    def namespace(self) -> str: ...

    @property
    def kubernetes_conn_id(self) -> str | None: ...

    @property
    def connection(self) -> dict[str, Any] | None: ...

    @property
    def client_options(self) -> dict[str, Any]: ...


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
    settings = await connection_settings(watched)
    async with await ClientOptions.from_dict(watched.client_options).connect(settings) as client:
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
    settings = await connection_settings(watched)
    found: list[str] = []
    async with await ClientOptions.from_dict(watched.client_options).connect(settings) as client:
        if watched.provisioning_request:
            request = await client.get(PROVISIONING_REQUESTS, watched.provisioning_request, watched.namespace)
            found.append(describe_conditions("ProvisioningRequest", request))
        if watched.workload_selector:
            workloads, _ = await client.list(WORKLOADS, watched.namespace, label_selector=watched.workload_selector)
            found.extend(describe_workload(workload) for workload in workloads)
    return "; ".join(text for text in found if text) or "no conditions yet"


async def connection_settings(place: ClusterPlace) -> ConnectionSettings:
    """The cluster of ``place`` (the one a trigger talks to): its ``connection`` as given, or its
    ``kubernetes_conn_id`` resolved by ``GangHook`` in a thread."""
    if place.connection is not None:
        return ConnectionSettings.from_dict(place.connection)
    hook = GangHook(conn_id=place.kubernetes_conn_id)
    return await asyncio.to_thread(hook.connection_settings)
