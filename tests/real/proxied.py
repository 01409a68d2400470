"""The provider behind the fault proxy on the real control plane, and the reliability verdict there.

- the ``proxy`` fixture: one :class:`~tests.real.fault_proxy.FaultProxy` per session in front of the
  session's real apiserver, reachable as the Airflow connection :data:`PROXY_CONN_ID`; each test
  starts with no rule and an empty log;
- :class:`ProxyLedger`: what :func:`tests.reliability.harness.check` reads from a ledger, taken from
  the proxy's log (successful creates of gang objects) and from the apiserver (what is still
  stored), so the real tier's fault rows use the same verdict as ``tests/reliability``;
- :func:`gang_operator`: the task every fault row runs, per mode, on the real tier's scenario.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import RetryAsIs
from tests.e2e.gang_dags import simulated_pod
from tests.real.backends import RealBackend, airflow_connection
from tests.real.fault_proxy import Call, FaultProxy
from tests.reliability.harness import QUICK_CLIENT

PROXY_CONN_ID = "kubernetes_fault_proxy"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
MODES = ("provisioning_request", "gates", "kueue")
GANG_COLLECTIONS = (
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/podtemplates",
    "/api/v1/namespaces/default/services",
    "/apis/batch/v1/namespaces/default/jobs",
    "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests",
    "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads",
)
"""Where a gang's objects live (its owner and world ConfigMaps included)."""


@pytest.fixture(scope="session")
def proxy_session(real_session: RealBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxy]:
    proxy = FaultProxy(real_session.cluster.kubeconfig_path, tmp_path_factory.mktemp("fault-proxy"))
    with proxy, airflow_connection(proxy.kubeconfig_path, PROXY_CONN_ID):
        yield proxy


@pytest.fixture
def proxy(proxy_session: FaultProxy, cluster: RealBackend) -> Iterator[FaultProxy]:
    """The session's proxy with no rule and an empty log; the ``cluster`` fixture checks leftovers."""
    proxy_session.set_rules([])
    proxy_session.calls(clear=True)
    proxy_session.on_answer = None
    yield proxy_session
    proxy_session.set_rules([])
    proxy_session.on_answer = None


def is_created(call: Call) -> bool:
    """A create of a gang object that the apiserver stored (the answer may have been cut)."""
    return call.verb == "create" and not call.subresource and 200 <= call.code < 300 and bool(call.gang)


def role_of(call: Call) -> tuple[str, str, str, str]:
    """The role a created object plays in its gang: one owner, one ProvisioningRequest, one pod per rank..."""
    rank = call.labels.get(naming.RANK_LABEL)
    return (call.resource, call.gang, call.labels.get(naming.ROLE_LABEL, ""), rank if rank is not None else call.name)


class ProxyLedger:
    """The ledger :func:`tests.reliability.harness.check` reads, on the real stack.

    ``duplicates``: a role of a gang created (and stored) more than once through the proxy - two
    ProvisioningRequests, two pods of one rank, one object created again after it was deleted;
    ``created_at``: the first stored create of each gang; ``objects_of``: the objects of those gangs
    the apiserver still holds.
    """

    def __init__(self, proxy: FaultProxy, kubeconfig: Path) -> None:
        self._proxy = proxy
        self._api = config.new_client_from_config(str(kubeconfig))

    def creates(self) -> dict[tuple[str, str, str, str], list[Call]]:
        stored: dict[tuple[str, str, str, str], list[Call]] = defaultdict(list)
        for call in self._proxy.calls():
            if is_created(call):
                stored[role_of(call)].append(call)
        return stored

    @property
    def duplicates(self) -> list[str]:
        return [
            f"{resource} {role}:{rank} of gang {gang} created {len(calls)} times ({[call.name for call in calls]})"
            for (resource, gang, role, rank), calls in self.creates().items()
            if len(calls) > 1
        ]

    @property
    def created_at(self) -> dict[str, float]:
        first: dict[str, float] = {}
        for calls in self.creates().values():
            for call in calls:
                first[call.gang] = min(first.get(call.gang, call.at), call.at)
        return first

    def objects_of(self, gangs: set[str]) -> list[tuple[str, str, str]]:
        if not gangs:
            return []
        selector = f"{naming.GANG_LABEL} in ({','.join(sorted(gangs))})"
        found = []
        for path in GANG_COLLECTIONS:
            response: Any = self._api.call_api(
                path,
                "GET",
                query_params=[("labelSelector", selector)],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=30,
            )
            items = json.loads(response.data).get("items") or []
            found += [(path, "default", str(item["metadata"]["name"])) for item in items]
        return found

    def close(self) -> None:
        self._api.close()


def gang_operator(mode: str, *, conn_id: str = PROXY_CONN_ID, retries: int = 2, **changes: Any) -> GangTrainingOperator:
    """A 2-member gang of 1-GPU members running 5 s on the real tier's scenario, in ``mode``, through
    ``conn_id``; retried as is; every call gives up after the quick client's 3 attempts."""
    arguments: dict[str, Any] = {
        "task_id": "train",
        "size": 2,
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(5),
        "reservation": mode,
        "deferrable": True,
        "retries": retries,
        "fallbacks": [RetryAsIs()],
        "client_options": QUICK_CLIENT,
        "kubernetes_conn_id": conn_id,
        "reservation_timeout": timedelta(minutes=2),
        "startup_timeout": timedelta(minutes=2),
    }
    if mode == "kueue":
        arguments["kueue_queue"] = "team"
    else:
        arguments["provisioning_class"] = ATOMIC
    arguments.update(changes)
    return GangTrainingOperator(**arguments)
